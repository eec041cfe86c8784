"""Rebinding real qemu guests on this host (2 CPUs, 1 NUMA node).

The ratio and the reserved CPUs decide the mode: with no CPU reserved, two
1-vCPU guests get a pCPU each (one-to-one); with CPU 0 reserved the pool is
{1}, so two guests share it (node range, ratio 4) or oversubscribe the
host (host range, ratio 1). Every expectation is checked in libvirt and in
/proc.
"""

import json
import os
import signal
import subprocess
import xml.etree.ElementTree as ET  # noqa: S405 - our own libvirtd

import fixtures

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import virt
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from tests.functional import base

S = cpuset.parse


class TestRebind(base.FunctionalTestCase):

    def rebind(self):
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(rec.close)
        result = rec.run_pass()
        self.assertIsNone(result.error)
        return result

    def modes(self, result):
        return {gp.name[len(base.PREFIX):]: (gp.mode, gp.rule)
                for gp in result.plan.guests
                if gp.name.startswith(base.PREFIX)}

    def test_one_to_one_then_idempotent(self):
        a, b = self.boot('a'), self.boot('b')
        first = self.rebind()
        self.assertEqual('dedicated', self.modes(first)['a'][0])
        pins_a, pins_b = self.libvirt_pins(a), self.libvirt_pins(b)
        self.assertEqual({S('0'), S('1')}, {pins_a[0], pins_b[0]})
        self.assertPinned(a, pins_a)
        self.assertPinned(b, pins_b)
        # Emulator threads follow the vCPU: the qemu main thread too.
        self.assertEqual(pins_a[0], self.cpus_allowed(self.pid(a)))
        second = self.rebind()
        self.assertEqual([], second.changes)
        self.assertEqual(0, second.calls['write'])
        self.assertGreater(first.calls['write'], 0)

    def test_node_range(self):
        self.cf.config(group='nova_pinning', reserved_cpus='0')
        a, b = self.boot('a'), self.boot('b')
        result = self.rebind()
        self.assertEqual(('node-range', 'rule-2-node-range'),
                         self.modes(result)['a'])
        self.assertPinned(a, {0: S('1')})
        self.assertPinned(b, {0: S('1')})

    def test_host_range(self):
        self.cf.config(group='nova_pinning', reserved_cpus='0',
                       allocation_ratio=1.0)
        a, b = self.boot('a'), self.boot('b')
        result = self.rebind()
        self.assertEqual(('host-range', 'rule-1-host-range'),
                         self.modes(result)['a'])
        self.assertPinned(a, {0: S('1')})
        self.assertPinned(b, {0: S('1')})

    def test_mode_change_repins_the_node(self):
        a = self.boot('a')
        self.rebind()
        self.assertEqual(1, len(self.libvirt_pins(a)[0]))
        self.boot('b')
        self.boot('c')
        result = self.rebind()
        self.assertEqual('node-range', self.modes(result)['a'][0])
        self.assertPinned(a, {0: S('0-1')})

    def test_guest_destroyed_in_the_middle_of_a_pass(self):
        a, b = self.boot('a'), self.boot('b')
        original = virt.Host.apply

        def destroy_then_apply(host, changes):
            a.destroy()  # after the read, before the writes
            return original(host, changes)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.virt.Host.apply', destroy_then_apply))
        result = self.rebind()
        skipped = {c.name for c, _ in result.skipped}
        self.assertEqual({a.name()}, skipped)
        self.assertEqual(1, len(self.libvirt_pins(b)[0]))
        self.assertPinned(b, self.libvirt_pins(b))

    def test_libvirtd_restarted_between_passes(self):
        a = self.boot('a')
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(rec.close)
        self.assertIsNone(rec.run_pass().error)
        os.kill(base.system_libvirtd_pid(), signal.SIGTERM)
        subprocess.run([base.TOP + '/tools/setup-host.sh'], check=True,
                       capture_output=True, timeout=120)
        self.conn = self.libvirt.open(base.URI)  # the test's died too
        self.addCleanup(self.conn.close)
        a = self.conn.lookupByName(a.name())  # qemu survived the restart
        b = self.boot('b')
        result = rec.run_pass()  # the same reconciler: its connection died
        self.assertIsNone(result.error)
        self.assertEqual({b.name()}, {c.name for c in result.applied})
        self.assertPinned(a, self.libvirt_pins(a))
        self.assertPinned(b, self.libvirt_pins(b))
        self.assertNotEqual(self.libvirt_pins(a), self.libvirt_pins(b))


class TestCommands(base.FunctionalTestCase):

    def test_rebind_status_snapshot(self):
        a = self.boot('a')
        proc = self.cli('rebind')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertIn(a.name(), proc.stdout)
        self.assertIn('libvirt calls', proc.stdout)
        self.assertPinned(a, self.libvirt_pins(a))
        self.assertEqual(1, len(self.libvirt_pins(a)[0]))

        proc = self.cli('status', '--format', 'json')
        self.assertEqual(0, proc.returncode, proc.stderr)
        guest = {g['name']: g for g in json.loads(proc.stdout)['guests']}[
            a.name()]
        self.assertTrue(guest['live_matches_plan'])
        self.assertEqual('dedicated', guest['mode'])

        proc = self.cli('status')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertIn('node 0:', proc.stdout)

        proc = self.cli('snapshot')
        self.assertEqual(0, proc.returncode, proc.stderr)
        snap = json.loads(proc.stdout)
        self.assertEqual(4.0, snap['allocation_ratio'])
        names = [d['xml'] for d in snap['domains']]
        self.assertTrue(any(a.name() in x for x in names))
        dom = [d for d in snap['domains'] if a.name() in d['xml']][0]
        self.assertGreater(dom['memory_by_node_kib'].get('0', 0), 0)

    def test_rebind_dry_run_writes_nothing(self):
        a = self.boot('a')
        before = self.kernel_pins(a)
        proc = self.cli('rebind', '--dry-run')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertIn('would set', proc.stdout)
        self.assertEqual(before, self.kernel_pins(a))

    def test_bad_configuration_is_one_message(self):
        self.cf.config(group='nova_pinning', reserved_cpus='0-7')
        self.boot('a')
        proc = self.cli('rebind')
        self.assertEqual(2, proc.returncode, proc.stderr)
        self.assertEqual('', proc.stdout)
        self.assertIn('reserved_cpus', proc.stderr)
        self.assertEqual(1, len(proc.stderr.strip().splitlines()),
                         proc.stderr)


class TestRelease(base.FunctionalTestCase):

    def test_release_gives_every_cpu_back(self):
        a = self.boot('a')
        proc = self.cli('rebind')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual(1, len(self.libvirt_pins(a)[0]))
        proc = self.cli('release')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertPinned(a, {0: S('0-1')})
        self.assertEqual(S('0-1'), self.cpus_allowed(self.pid(a)))

    def test_release_is_never_wider_than_novas_cpuset(self):
        # nova wrote <vcpu cpuset='0'> (its cpu_shared_set); a pass put
        # the guest on CPU 1. After release the migratable XML, which
        # nova sends to a live migration's destination, may name no CPU
        # nova did not give (issue 34, R1: it carried '0-1').
        a = self.boot('a', cpuset='0')
        self.cf.config(group='nova_pinning', reserved_cpus='0')
        proc = self.cli('rebind')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertPinned(a, {0: S('1')})
        self.cf.config(group='nova_pinning', reserved_cpus=None)
        proc = self.cli('release')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertPinned(a, {0: S('0')})
        self.assertEqual(S('0'), self.cpus_allowed(self.pid(a)))
        root = ET.fromstring(a.XMLDesc(  # noqa: S314
            self.libvirt.VIR_DOMAIN_XML_MIGRATABLE))
        self.assertEqual('0', root.find('vcpu').get('cpuset'))
        pins = {(p.tag, p.get('cpuset')) for p in root.find('cputune')
                if p.tag.endswith('pin')}
        self.assertTrue(pins)  # libvirt 9.0 keeps a live pin listed
        self.assertEqual({S('0')}, {S(c) for _, c in pins}, pins)
