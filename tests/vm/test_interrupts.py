"""Interrupts and unbound workqueues following the pins (the VM).

The VM's own virtio devices (two disks, the guest agent's serial port)
give it real MSI-X interrupts. A one-to-one guest on node 1 holds two
CPUs; ``nova-pinning-isolate watch`` (run as a transient unit) must take
every interrupt the kernel lets it move off them
(``effective_affinity_list``) and the unbound workqueue mask too; when
node 1 goes to node range they come back; when it is one-to-one again
they leave again; ``undo`` puts back what was there. Once with
irqbalance stopped, once with it running, when it must be told the
CPUs (its ``setup`` answer) and given its own choice back by ``undo``.

The figures each run saw are written to ``$NPH_VM_FIGURES`` (a
directory on the machine running the tests) when it is set.
"""

import json
import os
import time

from nova_pinning_hooks.engine import cpumask
from nova_pinning_hooks.engine import cpuset
from tests.vm import base

IRQPROBE = '/root/nph/tests/vm/irqprobe.py'
STATE = '/var/lib/nova-pinning-hooks/isolation.json'
WATCH = 'vmt-irqwatch'


def _cpus(text):
    return cpuset.parse(text, allow_empty=True)


class TestInterrupts(base.VMTestCase):

    def setUp(self):
        super().setUp()
        for cmd in (['systemctl', 'stop', WATCH],
                    ['systemctl', 'reset-failed', WATCH],
                    ['systemctl', 'stop', 'irqbalance']):
            self.sh(cmd, check=False)
        self.npi('undo', check=False)
        # Run last to first: the watch stops, undo (irqbalance still
        # there to be given its choice back), irqbalance stops.
        self.addCleanup(self.sh, ['systemctl', 'stop', 'irqbalance'],
                        check=False)
        self.addCleanup(self.npi, 'undo', check=False)
        self.addCleanup(self.sh, ['systemctl', 'reset-failed', WATCH],
                        check=False)
        self.addCleanup(self.sh, ['systemctl', 'stop', WATCH], check=False)
        self.figures = {}

    # -- the kernel's view --------------------------------------------------

    def probe(self, banned=False):
        # irqbalance answers its socket from the loop that also rescans:
        # in this TCG VM on a busy host a rescan (after it was told new
        # CPUs) once kept it from answering within the 15 s bound. Asked
        # again then, up to four times; any other failure fails at once.
        for _ in range(4):
            out = self.sh(['python3', IRQPROBE] +
                          (['banned'] if banned else []),
                          timeout=60, check=False)
            if out.rc == 0:
                return json.loads(out.out)
            if not (banned and 'timed out' in out.err):
                break
        self.fail('irqprobe failed: %r' % (out,))

    @staticmethod
    def virtio(view):
        return {n: i for n, i in view['irqs'].items()
                if i['name'].startswith('virtio')}

    def state(self):
        out = self.sh(['cat', STATE], check=False)
        return json.loads(out.out) if out.rc == 0 else {}

    def held(self, name):
        vcpus = self.kernel(name)[name]['vcpus']
        cpus = [_cpus(a) for a in vcpus.values()]
        self.assertTrue(all(len(c) == 1 for c in cpus), vcpus)
        return frozenset().union(*cpus)

    def off(self, held):
        """(view, state) once every movable virtio interrupt and the
        workqueue mask are off ``held``; None before.

        x86 without interrupt remapping moves an MSI at its next
        delivery: until then ``smp_affinity_list`` shows the new set and
        ``effective_affinity_list`` the old CPU. So every movable one
        must be allowed off ``held``, and every one that fired between
        two readings must be delivered off it."""
        st = self.state()
        if cpuset.format(held) != st.get('one_to_one'):
            return None
        refused = st.get('interrupts', {}).get('refused', {})
        first = self.probe()
        view = self.probe()
        for n, i in self.virtio(view).items():
            if n in refused:
                continue
            if _cpus(i['allowed']) & held:
                return None
            if i['count'] > first['irqs'][n]['count'] and \
                    _cpus(i['effective']) & held:
                return None
        if cpumask.parse(view['workqueue']) & held:
            return None
        return view, st

    def save(self, name):
        where = os.environ.get('NPH_VM_FIGURES')
        if where:
            os.makedirs(where, exist_ok=True)
            with open(os.path.join(where, name + '.json'), 'w') as f:
                json.dump(self.figures, f, indent=1, sort_keys=True)

    # -- the scenario -----------------------------------------------------

    def delivered_on(self, held):
        """The guest agent's interrupt (virtio0-virtqueues, which every
        command through the agent fires) put on ``held``, as the kernel's
        spread at boot or irqbalance may have put it: the test then has
        an interrupt that must leave."""
        view = self.probe()
        n = [n for n, i in view['irqs'].items()
             if i['name'] == 'virtio0-virtqueues'][0]
        self.addCleanup(self.sh, 'echo %s > /proc/irq/%s/smp_affinity_list'
                        % (view['irqs'][n]['allowed'], n), check=False)
        self.sh('echo %s > /proc/irq/%s/smp_affinity_list'
                % (cpuset.format(held), n))
        self.wait_for('interrupt %s delivered on %s' % (
            n, cpuset.format(held)), lambda: _cpus(
                self.probe()['irqs'][n]['effective']) & held)

    def wait_told(self, held):
        """irqbalance's banned CPUs once they cover ``held``. irqbalance
        1.9.2 takes ``settings cpus`` at once but answers ``setup`` with
        the list it had until its next rescan (CI once read '' right
        after the agent's state showed the interrupts moved, with the
        VM tests beside the rest of the run): up to two of its 10 s
        cycles, more on a loaded host. A failure shows the agent's
        irqbalance record (``failed`` there: it could not tell it)."""
        def covered():
            told = self.probe(banned=True)['banned']
            return told if told is not None and held <= _cpus(told) \
                else None
        try:
            return self.wait_for('irqbalance banning %s'
                                 % cpuset.format(held), covered)
        except self.failureException as exc:
            self.fail('%s; the agent\'s irqbalance record: %r'
                      % (exc, self.state().get('irqbalance')))

    def wait_banned(self, banned):
        """irqbalance's banned CPUs back to ``banned``. Told its own choice
        again (``settings cpus NULL``), irqbalance 1.9.2 still answers
        ``setup`` with the list it was given until its next rescan (CI
        once read '4-5' right after undo): up to two of its 10 s cycles."""
        self.wait_for('irqbalance banning %r again' % banned, lambda: (
            self.probe(banned=True)['banned'] == banned))

    def follow_the_pins(self, irqbalance):
        a = self.create_guest('irq-a', 2, node=1)
        self.np('rebind')
        held = self.held(a)
        if irqbalance:
            self.sh(['systemctl', 'start', 'irqbalance'])
            self.wait_for('irqbalance socket', lambda: self.sh(
                'ls /run/irqbalance/*.sock', check=False).rc == 0)
        self.delivered_on(held)
        before = self.probe(banned=irqbalance)
        virtio = self.virtio(before)
        self.assertTrue(virtio, before)
        self.figures['before'] = before
        self.figures['held'] = cpuset.format(held)

        # With the shipped unit's sandbox (no capability, /proc/irq and
        # the workqueues' cpumask the only kernel files it may write):
        # what it must still do there (issue 40, M-2).
        self.sh(['systemd-run', '--unit', WATCH] +
                base.sandbox('nova-pinning-isolate.service') +
                ['nova-pinning-isolate', '--config-file', base.CONF,
                 'watch'])
        view, st = self.wait_for('virtio interrupts off CPUs %s'
                                 % cpuset.format(held),
                                 lambda: self.off(held))
        refused = st['interrupts'].get('refused', {})
        # The test shows something: a virtio interrupt that was delivered
        # on a one-to-one CPU before is delivered elsewhere now.
        moved = [n for n, i in virtio.items() if n not in refused and
                 _cpus(i['effective']) & held and
                 not _cpus(view['irqs'][n]['effective']) & held]
        self.assertTrue(moved, ('no virtio interrupt left %s'
                                % cpuset.format(held), before, view))
        # Managed queue interrupts of the disks stay (refused, counted).
        self.assertTrue(any(virtio[n]['name'].startswith(('virtio1-req',
                                                          'virtio2-req'))
                            for n in refused if n in virtio), refused)
        # Exit 0 and every unit answered, on a loaded host too (issue
        # 47: one deadline for all units left 0.7 s to the third).
        start = time.monotonic()
        status = json.loads(self.npi('status', '--format', 'json').out)
        self.figures['status_seconds'] = round(time.monotonic() - start, 2)
        self.assertEqual(0, status['units_unknown'], status['slices'])
        self.assertEqual(cpuset.format(held), status['one_to_one_cpus'])
        self.assertIn('irqs_firing_on_one_to_one', status)
        self.figures['one_to_one'] = {'view': view, 'state': st,
                                      'status': status}
        if irqbalance:
            told = self.wait_told(held)
            self.figures['one_to_one']['banned'] = told

        # Node 1 goes to node range: everything comes back.
        self.create_guest('irq-d', 2, node=1)
        self.create_guest('irq-e', 1, node=1)
        self.np('rebind')
        self.assertEqual('node-range', self.planned()[a]['mode'])

        def back():
            st = self.state()
            view = self.probe()
            if st.get('one_to_one') != '' or \
                    st.get('interrupts', {}).get('moved') or \
                    view['workqueue'] != before['workqueue']:
                return None
            if not irqbalance and any(
                    view['irqs'][n]['allowed'] != i['allowed']
                    for n, i in virtio.items()):
                return None
            return view
        view = self.wait_for('interrupts back with node range', back)
        self.figures['node_range'] = view
        if irqbalance:
            self.wait_banned(before['banned'])

        # One-to-one again: they leave again.
        for name in ('irq-d', 'irq-e'):
            self.sh(['virsh', '-q', '-c', 'qemu:///system', 'destroy',
                     base.PREFIX + name], timeout=180)
        self.np('rebind')
        held = self.held(a)
        view, _ = self.wait_for('virtio interrupts off CPUs %s again'
                                % cpuset.format(held),
                                lambda: self.off(held))
        self.figures['one_to_one_again'] = {'held': cpuset.format(held),
                                            'view': view}

        # undo: what was there before.
        self.sh(['systemctl', 'stop', WATCH])
        self.npi('undo')
        view = self.probe(banned=irqbalance)
        self.figures['undone'] = view
        self.assertEqual(before['workqueue'], view['workqueue'])
        self.assertEqual({}, self.state())
        if irqbalance:
            self.wait_banned(before['banned'])
        else:
            self.assertEqual(
                {n: i['allowed'] for n, i in virtio.items()},
                {n: view['irqs'][n]['allowed'] for n in virtio})

    def test_irqbalance_stopped(self):
        try:
            self.follow_the_pins(irqbalance=False)
        finally:
            self.save('irqbalance-stopped')

    def test_irqbalance_running(self):
        try:
            self.follow_the_pins(irqbalance=True)
        finally:
            self.save('irqbalance-running')
