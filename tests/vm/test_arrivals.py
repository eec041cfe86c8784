"""Arrived guests in the 2-socket VM (issue 61): a managed save and
restore, and a live migration between two libvirt daemons (qemu started
with ``-incoming``), homed and bound one-to-one by the package, and
their memory moved home.

The guests spin in SeaBIOS. The restore writes only the pages the guest
had touched; its split over both nodes (the issue's measurements: an
incoming copy's follows where the kernel ran qemu's receive thread) is
made with ``move_pages(2)``: every other present page of the guest's
qemu to the other node (``tests/vm/arrival.py``).

The migration's source is a second libvirtd in the VM
(``tools/second-libvirtd.sh``: its own host UUID, configuration, run
and state directories, socket); random data written into the guest's
RAM there makes the copy carry pages, not zero pages. Its destination is
the VM's libvirtd, with the package's agent running as its shipped unit
runs it (its sandbox): the agent's own passes and memory-home thread,
on libvirt's events, must bind the arrived guest one-to-one on one node
with 90 % of its memory there within 60 s of the copy's end. Where the
copy itself left 90 % on one node (no move needed), the test splits
the memory as for the restore and has the agent pass again (a suspend
and resume: libvirt's events), so that every run shows a move. By hand
only (``NPH_ARRIVAL_MIGRATION=1``): on the Debian 13 VM that split did
not hold (``TestMigration``). Both tests check that every cgroup of the
moved guest may take memory from every node again (``assertWidened``).

With ``NPH_ARRIVAL_FIGURES`` naming a file, each run appends its
figures there as one JSON line. With ``NPH_ARRIVAL_MIGRATIONS=N`` too,
``test_figures`` (else skipped) migrates the guest in and out N times
for each of: NUMA balancing on and off, the VM idle and every CPU
loaded; one line per arrival (performance.rst, "Bringing arrived memory
home"). ``NPH_ARRIVAL_MEMORY_HOME=false``: the agent runs with
``memory_home = false`` (the test must then fail).
"""

import json
import os
import re
import time

import testtools
from testtools.content import text_content

from tests.vm import base
from tests.vm import machine

ARRIVAL = '/root/nph/tests/vm/arrival.py'
VIRSH = ['virsh', '-q', '-c', 'qemu:///system']
XML = """<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>{mib}</memory>
  <vcpu>2</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices>
</domain>"""


SECOND = '/var/lib/nph-libvirtd2'
SECOND_TOOL = '/root/nph/tools/second-libvirtd.sh'
AGENT = 'nph-vm-agent'
LOAD = 'nph-vm-load'
BALANCING = '/proc/sys/kernel/numa_balancing'
# s from the copy's end: the bound for one-to-one and home.
ARRIVAL_BOUND = 60
# The test's guest, and the figures' (the issue's 256 MiB, filled).
MIGRANT_MIB, FILL_MIB = 128, 48
FIGURES_MIB, FIGURES_FILL_MIB = 256, 224
# "memory home of NAME: RESULT (REASON)": passes/memhome.py's line
# (oslo.log ends it with a colour reset, even in the journal).
MOVE_LINE = re.compile(r'memory home of (\S+): (\S+) \((.*)\)')
MOVED = re.compile(r'(\d+) KiB to node \d+ in ([\d.]+) s')


def _one_cpu(allowed):
    return int(allowed) if allowed.isdigit() else None


class ArrivalCase(base.VMTestCase):

    def memory(self, name):
        return {int(n): kib for n, kib in
                self.kernel(name)[name]['numa_maps_kib'].items()}

    def split(self, name, pid):
        """The memory of an incoming copy over both nodes: pages moved
        to the other node until no node holds 80 % (a young qemu under
        TCG still grows: its translated code is anonymous memory); the
        moves' outcomes and the memory then."""
        before, splits = self.memory(name), []
        for _ in range(4):
            if max(before.values()) < 0.8 * sum(before.values()):
                break
            most = max(sorted(before), key=before.get)
            splits.append(json.loads(self.sh(
                ['python3', ARRIVAL, 'split', str(pid), str(1 - most)],
                timeout=300).out))
            before = self.memory(name)
        return splits, before

    def assertWidened(self, name):
        """Every cgroup of the guest may take memory from every node
        again after its move (a home node that fills cannot starve it):
        each ``cpuset.mems`` libvirt wrote is all nodes, the others
        unset. Issue 61: libvirt refused the widening of a nodeset
        written strict, and every group kept the home node alone."""
        view = self.kernel(name)[name]
        mems = [view['domain_mems']] + [
            c['mems'] for c in view['cpusets'].values()]
        every = '%d-%d' % (min(machine.NODES), max(machine.NODES))
        self.assertTrue(mems and set(mems) <= {'', every} and
                        every in mems, (every, view['cpusets'],
                                        view['domain_mems']))
        return mems

    def record(self, figures):
        out = os.environ.get('NPH_ARRIVAL_FIGURES')
        if out:
            with open(out, 'a') as f:
                f.write(json.dumps(figures) + '\n')


class MigrationCase(ArrivalCase):
    """A second libvirtd, the migration's source, and the package's
    agent on the VM's libvirtd, the destination."""

    def setUp(self):
        super().setUp()
        self.conf = base.CONF
        if os.environ.get('NPH_ARRIVAL_MEMORY_HOME') == 'false':
            # Under /etc: the unit's sandbox hides /root (ProtectHome).
            self.conf = self.conf_with(
                '/etc/nova-pinning-hooks/no-home.conf', '[nova_pinning]',
                '[nova_pinning]\nmemory_home = false')
        self.src = self.sh([SECOND_TOOL, 'start', SECOND],
                           timeout=300).out.split()[-1]
        self.addCleanup(self.sh, [SECOND_TOOL, 'stop', SECOND], timeout=300,
                        check=False)
        self.addCleanup(self.sh, 'for d in $(virsh -q -c %s list --name); '
                        'do virsh -q -c %s destroy $d; done'
                        % (self.src, self.src), timeout=180, check=False)
        self.addOnException(self.diagnose)
        # The journal from here on: this start's lines, no earlier one's.
        self.cursor = self.sh(['journalctl', '-q', '-n', '1',
                               '--show-cursor']).out.split('cursor: ')[-1]
        # As the shipped unit runs it (its state directory is made by
        # its ExecStartPre, which sandbox() leaves out).
        self.sh(['mkdir', '-p', '-m', '0755', '/var/lib/nova-pinning-hooks'])
        self.sh(['systemd-run', '--unit', AGENT, '--collect'] +
                base.sandbox('nova-pinning-agent.service') +
                ['nova-pinning', '--config-file', self.conf, 'agent'])
        self.addCleanup(self.sh, ['systemctl', 'stop', AGENT], timeout=200,
                        check=False)
        # Its events are registered before its first pass.
        self.wait_for('the agent\'s first pass', lambda: (
            'rebinding pass' in self.journal()))

    def journal(self, unit=AGENT):
        return self.sh(['journalctl', '-q', '-o', 'cat', '--no-pager',
                        '-u', unit, '--after-cursor', self.cursor.strip()]
                       ).out

    def diagnose(self, exc_info):
        """The agent's and the source daemon's words, for a failure."""
        self.addDetail('agent', text_content(self.sh(
            'systemctl status --no-pager %s; journalctl -q --no-pager -u %s'
            ' -n 300' % (AGENT, AGENT), check=False).out))
        self.addDetail('source', text_content(self.sh(
            'tail -n 50 %s/log/qemu/*.log; virsh -c qemu:///system '
            'capabilities | grep -A3 secmodel' % SECOND, check=False).out))

    def moves(self, name):
        """(result, reason) of each memory-home attempt on ``name``."""
        found = []
        for line in self.journal().splitlines():
            m = MOVE_LINE.search(line.strip())
            if m and m.group(1) == name:
                found.append((m.group(2), m.group(3)))
        return found

    def start_on_source(self, name, mib=MIGRANT_MIB, fill=FILL_MIB):
        path = '/root/%s.xml' % name
        self.vm.write(path, XML.format(name=name, mib=mib))
        self.sh(['virsh', '-q', '-c', self.src, 'create', path], timeout=180)
        pid = self.sh(['cat', '%s/run/libvirt/qemu/%s.pid'
                       % (SECOND, name)]).out.strip()
        return json.loads(self.sh(['python3', ARRIVAL, 'fill', pid,
                                   str(mib), str(fill)],
                                  timeout=300).out)

    def migrate(self, src, dst, name, dname, watch):
        return json.loads(self.sh(['python3', ARRIVAL, 'migrate', src, dst,
                                   name, dname, str(watch)],
                                  timeout=900).out)

    def homed(self, name):
        """(home node, memory per node) once ``name`` is one-to-one on
        its home node (status's plan, each vCPU thread's one CPU there)
        with 90 % of its memory there; else None, and why in
        ``self.last``."""
        guest = self.planned().get(name)
        view = self.kernel(name)[name]
        memory = {int(n): kib for n, kib in view['numa_maps_kib'].items()}
        self.last = (guest, view['vcpus'], memory)
        if not guest or guest['mode'] != 'dedicated' or \
                guest['home_node'] is None:
            return None
        home = guest['home_node']
        cpus = [_one_cpu(a) for a in view['vcpus'].values()]
        if None in cpus or len(set(cpus)) != len(cpus) or \
                not set(cpus) <= machine.NODES[home] or \
                memory.get(home, 0) < 0.9 * sum(memory.values()):
            return None
        return home, memory

    def wait_homed(self, name, bound):
        """``homed`` within ``bound`` s: its value and the seconds it
        took, or (None, None)."""
        start = time.monotonic()
        while True:
            found = self.homed(name)
            if found or time.monotonic() - start > bound:
                return found, (round(time.monotonic() - start, 1)
                               if found else None)
            time.sleep(1)


class TestMigration(MigrationCase):
    """By hand only (``NPH_ARRIVAL_MIGRATION=1``): on the Debian 13 VM
    (2026-12-02) it failed 3 runs of 4 in the test's own forced split:
    ``move_pages`` reported about 8,600 pages moved to the other node a
    time, yet ``numa_maps`` kept 99 % on the first (not explained), so
    no move was due. Not in CI until the split holds."""

    def setUp(self):
        if os.environ.get('NPH_ARRIVAL_MIGRATION') != '1':
            testtools.TestCase.setUp(self)
            self.skipTest('by hand: NPH_ARRIVAL_MIGRATION=1 (its split '
                          'does not hold on the Debian 13 VM)')
        super().setUp()

    def test_a_migrated_guest_is_homed_and_its_memory_brought_home(self):
        name, dname = base.PREFIX + 'migrant', base.PREFIX + 'migrated'
        filled = self.start_on_source(name)
        arrived = self.migrate(self.src, 'qemu:///system', name, dname, 10)
        pid = arrived['pid']
        cmdline = self.sh(['cat', '/proc/%d/cmdline' % pid]).out
        self.assertIn('-incoming', cmdline.split('\0'))
        left = ARRIVAL_BOUND - arrived['samples'][-1][0]
        homed, seconds = self.wait_homed(dname, left)
        self.assertTrue(homed, ('not one-to-one with 90 %% of its memory '
                                'home within %d s of the copy'
                                % ARRIVAL_BOUND, self.last, arrived))
        moves = self.moves(dname)
        forced = None
        after_copy = {'moves': moves, 'journal': self.journal(),
                      'view': self.kernel(dname)[dname]}
        self.addDetail('after_copy', text_content(json.dumps(after_copy,
                                                             indent=1)))
        if not moves:
            # The copy left 90 % on one node: the agent homed it by its
            # memory, nothing to move. Split it as a copy does, and
            # have the agent pass again (libvirt's events).
            splits, split = self.split(dname, pid)
            for cmd in ('suspend', 'resume'):
                self.sh(VIRSH + [cmd, dname], timeout=180)
            forced = {'splits': splits, 'split_kib': split,
                      'after_copy': after_copy}
            self.addDetail('forced', text_content(json.dumps(
                {'splits': splits, 'split_kib': split}, indent=1)))
            homed, seconds = self.wait_homed(dname, ARRIVAL_BOUND)
            self.assertTrue(homed, ('not home within %d s of its split'
                                    % ARRIVAL_BOUND, self.last, forced))
            moves = self.moves(dname)
        self.assertEqual(['moved'], [result for result, _ in moves], moves)
        mems = self.assertWidened(dname)
        self.record({'migration': arrived, 'filled': filled,
                     'forced': forced, 'homed': homed,
                     'homed_seconds': seconds, 'moves': moves,
                     'mems': mems})


class TestMigrationFigures(MigrationCase):
    """Not a check: figures (NPH_ARRIVAL_MIGRATIONS)."""

    def setUp(self):
        self.count = int(os.environ.get('NPH_ARRIVAL_MIGRATIONS', '0'))
        if not self.count or not os.environ.get('NPH_ARRIVAL_FIGURES'):
            # Before the VM and its daemons: nothing to run.
            testtools.TestCase.setUp(self)
            self.skipTest('figures only: NPH_ARRIVAL_MIGRATIONS and '
                          'NPH_ARRIVAL_FIGURES unset')
        super().setUp()

    def test_figures(self):
        """NPH_ARRIVAL_MIGRATIONS arrivals a case; one line each."""
        count = self.count
        name, dname = base.PREFIX + 'migrant', base.PREFIX + 'migrated'
        filled = self.start_on_source(name, FIGURES_MIB, FIGURES_FILL_MIB)
        balancing = self.sh(['cat', BALANCING]).out.strip()
        self.addCleanup(self.sh, ['sh', '-c', 'echo %s > %s'
                                  % (balancing, BALANCING)])
        self.addCleanup(self.sh, ['systemctl', 'stop', LOAD], check=False)
        for numa_balancing in ('1', '0'):
            self.sh(['sh', '-c', 'echo %s > %s'
                     % (numa_balancing, BALANCING)])
            for loaded in (False, True):
                if loaded:
                    # A busy loop on each of the VM's 8 CPUs.
                    self.sh(['systemd-run', '--unit', LOAD, '--collect',
                             'sh', '-c', 'for i in 1 2 3 4 5 6 7 8; do '
                             '(while :; do :; done) & done; wait'])
                for i in range(count):
                    self.record(self.one_arrival(name, dname) | {
                        'numa_balancing': numa_balancing,
                        'loaded': loaded, 'run': i, 'filled': filled})
                if loaded:
                    self.sh(['systemctl', 'stop', LOAD], timeout=200)

    def one_arrival(self, name, dname):
        """A migration in, its figures, and back out again."""
        seen = len(self.moves(dname))
        arrived = self.migrate(self.src, 'qemu:///system', name, dname,
                               ARRIVAL_BOUND)
        samples = arrived.pop('samples')
        homed, seconds = self.wait_homed(
            dname, max(1, ARRIVAL_BOUND - samples[-1][0]))
        # A move of a guest already 90 % home may still be under way.
        time.sleep(5)
        moves = self.moves(dname)[seen:]
        moved = [MOVED.search(reason) for result, reason in moves
                 if result == 'moved']
        kib = sum(int(m.group(1)) for m in moved if m)
        move_seconds = sum(float(m.group(2)) for m in moved if m)
        self.migrate('qemu:///system', self.src, dname, name, 0)

        def share(memory):
            return round(max(memory.values()) / sum(memory.values()), 3)
        return {'copy_seconds': arrived['copy_seconds'],
                'share_before': share(samples[0][1]),
                'share_after': share(self.last[2]),
                'watch_home_seconds': arrived['home_seconds'],
                'homed': bool(homed),
                'homed_seconds_after_watch': seconds,
                'moves': moves, 'pages_moved': kib // 4,
                'move_seconds': move_seconds,
                'seconds_per_gib': (round(move_seconds * 1048576 / kib, 1)
                                    if kib else None),
                'first_sample': samples[0], 'last_sample': samples[-1]}


class TestRestore(ArrivalCase):

    def test_a_restored_guest_is_homed_and_its_memory_brought_home(self):
        name = base.PREFIX + 'arrived'
        path = '/root/%s.xml' % name
        self.vm.write(path, XML.format(name=name, mib=128))
        self.sh(VIRSH + ['define', path])
        self.addCleanup(self.sh, VIRSH + ['undefine', '--managed-save',
                                          name], check=False)
        self.sh(VIRSH + ['start', name], timeout=180)
        time.sleep(2)  # SeaBIOS touches its pages
        self.sh(VIRSH + ['managedsave', name], timeout=300)
        self.sh(VIRSH + ['start', name], timeout=300)  # the restore
        pid = self.kernel(name)[name]['pid']
        cmdline = self.sh(['cat', '/proc/%d/cmdline' % pid]).out
        self.assertIn('-incoming', cmdline.split('\0'))
        restored = self.memory(name)
        splits, before = self.split(name, pid)
        self.np('rebind')
        guest = self.planned()[name]
        home = guest['home_node']
        self.assertEqual(('dedicated', 'arrived'),
                         (guest['mode'], guest['home_source']),
                         (before, guest))
        uuid = self.sh(VIRSH + ['domuuid', name]).out.strip()
        away = sum(before.values()) - before.get(home, 0)
        moved = json.loads(self.sh(['python3', ARRIVAL, 'move', uuid,
                                    str(home), str(away)],
                                   timeout=300).out)
        self.assertEqual(('moved', True),
                         (moved['result'], moved['widened']), moved)
        after = self.memory(name)
        self.assertGreaterEqual(after.get(home, 0),
                                0.9 * sum(after.values()), after)
        self.assertWidened(name)
        self.np('rebind')
        again = self.planned()[name]
        self.assertEqual(('dedicated', home, 'memory'),
                         (again['mode'], again['home_node'],
                          again['home_source']))
        self.assertEqual(guest['vcpu_pins'], again['vcpu_pins'])
        self.record({'restored_kib': restored, 'splits': splits,
                     'before_kib': before, 'home': home, 'move': moved,
                     'after_kib': after})
