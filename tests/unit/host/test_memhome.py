"""Arrivals on the host (issue 61): whether a guest's qemu was started
with -incoming (read only for guests whose memory is split), the home
node's free memory, and one move home through the fake libvirt
(restrictive nodeset of the home node, widened again; bounded by free
memory and time)."""

import os
import threading

import fixtures
import testtools

from nova_pinning_hooks.host import memhome
from nova_pinning_hooks.host import qemuproc
from nova_pinning_hooks.host import virt
from tests.fixtures import FakeLibvirtFixture
from tests.fixtures import host_options
from tests.unit import hosts

VM_2S = hosts.capabilities([[[0, 1], [2, 3]], [[4, 5], [6, 7]]],
                           memory_kib=1024 * 1024)
MIB = 1024


class TestArrived(testtools.TestCase):

    def proc(self, cmdline):
        root = self.useFixture(fixtures.TempDir()).path
        os.mkdir(os.path.join(root, '42'))
        if cmdline is not None:
            with open(os.path.join(root, '42', 'cmdline'), 'wb') as f:
                f.write(cmdline)
        return root

    def test_cmdline(self):
        for cmdline, want in [
                (b'/usr/bin/qemu-system-x86_64\0-name\0guest=g\0'
                 b'-incoming\0defer\0', True),
                (b'qemu\0-incoming\0fd:33\0', True),
                (b'qemu\0-name\0guest=g\0-S\0', False),
                (b'qemu\0-name\0guest=-incoming-test\0', False),
                (b'', False),
                (None, False)]:
            self.assertEqual(want, qemuproc.arrived(42, self.proc(cmdline)),
                             cmdline)

    def test_read_only_for_split_guests(self):
        fake = self.useFixture(FakeLibvirtFixture(VM_2S)).host
        a = fake.add_domain('a', 2, xml=hosts.domain_xml('a', 2),
                            memory_by_node_kib={'0': 40 * MIB,
                                                '1': 24 * MIB})
        b = fake.add_domain('b', 2, xml=hosts.domain_xml('b', 2),
                            memory_by_node_kib={'1': 64 * MIB})
        a.arrived = b.arrived = True
        asked = []
        real = virt.virtread.Reader._arrived_from_proc

        def counted(reader, name):
            asked.append(name)
            return real(reader, name)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.virtread.Reader._arrived_from_proc',
            counted))
        adapter = virt.Host('qemu:///system', host_options())
        self.addCleanup(adapter.close)
        entries = {d['xml'].split('<name>')[1].split('<')[0]: d
                   for d in adapter.read_snapshot().domains}
        self.assertEqual(['a'], asked)
        self.assertTrue(entries['a'].get('arrived'))
        self.assertNotIn('arrived', entries['b'])


class TestFree(testtools.TestCase):

    def test_node_meminfo(self):
        root = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(root, 'node1'))
        with open(os.path.join(root, 'node1', 'meminfo'), 'w') as f:
            f.write('Node 1 MemTotal:        1015808 kB\n'
                    'Node 1 MemFree:          612340 kB\n'
                    'Node 1 MemUsed:          403468 kB\n')
        self.assertEqual(612340, memhome.node_free_kib(1, root))
        self.assertIsNone(memhome.node_free_kib(0, root))

    def test_time_bound(self):
        self.assertEqual(30.0, memhome.time_bound(0))
        self.assertEqual(50.0, memhome.time_bound(1024 * 1024))
        self.assertEqual(70.0, memhome.time_bound(2 * 1024 * 1024))


class TestMove(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(FakeLibvirtFixture(VM_2S)).host
        self.dom = self.fake.add_domain(
            'g', 2, xml=hosts.domain_xml('g', 2, memory_kib=256 * MIB),
            memory_by_node_kib={'0': 160 * MIB, '1': 96 * MIB})
        self.adapter = virt.Host('qemu:///system', host_options())
        self.addCleanup(self.adapter.close)

    def move(self, free, away=96 * MIB):
        return memhome.move(self.adapter, self.dom.UUIDString(), 0, away,
                            {0, 1}, reserve_kib=256 * MIB,
                            free_kib=lambda node: free, max_move_kib=96 * MIB)

    def test_cases(self):
        # (free KiB on the home node, busy writes, vanishes,
        #  result, nodesets written, widened)
        cases = [
            ('room', 352 * MIB, 0, False, 'moved', ['0', '0-1'], True),
            ('one KiB more than a move may copy', 900 * MIB, 0, False,
             'too-large', [], True),
            ('one KiB short', 352 * MIB - 1, 0, False, 'no-room', [], True),
            ('free unknown', None, 0, False, 'no-room', [], True),
            ('home write refused, still widened', 900 * MIB, 1, False,
             'failed', ['0-1'], True),
            ('both refused: left to widen', 900 * MIB, 2, False, 'failed',
             [], False),
            ('gone', 900 * MIB, 0, True, 'gone', [], True),
        ]
        for name, free, busy, vanish, result, written, widened in cases:
            self.dom.numa_history.clear()
            self.fake.busy[self.dom.name()] = busy
            if vanish:
                self.fake.vanish_on_pin.add(self.dom.name())
            before = dict(self.adapter.calls)
            outcome = self.move(free, 96 * MIB + (result == 'too-large'))
            self.assertEqual((result, written, widened),
                             (outcome.result, self.dom.numa_history,
                              outcome.widened), name)
            writes = self.adapter.calls['write'] - before.get('write', 0)
            if result in ('no-room', 'too-large'):
                self.assertEqual(0, writes, name)
            self.fake.busy.clear()

    def test_a_refusal_of_a_running_guest_is_no_departure(self):
        # A guest libvirt made strict (a nodeset written without a mode)
        # keeps its nodeset: libvirt refuses with the code of a write to
        # a stopped guest. Taken for "gone", a failed widening was once
        # reported as moved and widened (libvirt 9.0, issue 61).
        self.dom.numa_mode, self.dom.numa_nodeset = 'strict', '0'
        outcome = self.move(900 * MIB)
        self.assertEqual(('failed', [], False),
                         (outcome.result, self.dom.numa_history,
                          outcome.widened), outcome)
        self.assertIn('numatune mode', outcome.reason)
        widened = memhome.widen(self.adapter, self.dom.UUIDString(), {0, 1})
        self.assertEqual(('failed', False),
                         (widened.result, widened.widened))

    def test_counted_as_reads_and_writes(self):
        outcome = self.move(900 * MIB)
        self.assertEqual('moved', outcome.result)
        # Reads: the connection's open and one lookup; writes: the
        # strict nodeset and its widening.
        self.assertEqual((2, 2), (self.adapter.calls['read'],
                                  self.adapter.calls['write']))
        self.assertEqual(2, self.adapter.calls['setNumaParameters'])

    def test_the_strict_write_is_bounded_by_the_move_s_size(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.memhome.BASE_SECONDS', 0.2))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.memhome.SECONDS_PER_GIB', 0.0))
        release = threading.Event()
        self.addCleanup(release.set)
        self.fake.hang['setNumaParameters'] = release
        outcome = self.move(900 * MIB)
        self.assertEqual('timeout', outcome.result)
        self.assertLess(outcome.seconds, 5.0)
        # The connection was abandoned with the hung call: the widening
        # is left to the memory-home thread.
        self.assertFalse(outcome.widened)
        # The connection's own bound is back for every later call.
        self.assertEqual(host_options().libvirt_call_timeout,
                         self.adapter.call_timeout)
