"""The writes' table (``virtwrite.WRITES``) on the fake libvirt: each
kind of change reaches the one libvirt call that writes it, with its
index and CPUs in the right places."""

import testtools

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.host import virt
from nova_pinning_hooks.host import virtwrite
from tests.fixtures import FakeLibvirtFixture
from tests.fixtures import host_options
from tests.unit import hosts

Kind = plan_mod.ChangeKind
# What libvirt documents as the call of each kind (virDomainPinVcpuFlags,
# virDomainPinEmulator, virDomainPinIOThread, virDomainSetNumaParameters).
EXPECTED = {Kind.VCPU: 'pinVcpuFlags', Kind.EMULATOR: 'pinEmulator',
            Kind.IOTHREAD: 'pinIOThread', Kind.NUMA: 'setNumaParameters'}
WRITE_CALLS = frozenset(EXPECTED.values())


class TestWrites(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        self.adapter = virt.Host('qemu:///system',
                                 host_options(set_home_node=True))
        self.dom = self.fake.add_domain('g', 2)

    def apply(self, kind, index, new):
        change = plan_mod.PinChange(self.dom.UUIDString(), 'g', kind, index,
                                    None, cpuset.parse(new))
        result = self.adapter.apply([change])
        self.assertEqual([change], result.applied, result.skipped)
        # Exactly one write, by the call libvirt names for the kind.
        self.assertEqual({EXPECTED[kind]: 1},
                         {m: n for m, n in self.fake.calls.items()
                          if m in WRITE_CALLS and n})

    def test_every_kind_has_its_call(self):
        self.assertEqual(set(Kind), set(virtwrite.WRITES))
        self.assertEqual(EXPECTED, {k: api for k, (api, _) in
                                    virtwrite.WRITES.items()})

    def test_vcpu_pin(self):
        self.apply(Kind.VCPU, 1, '2-3')
        self.assertEqual((2, 3), self.dom.vcpu_pins[1])
        self.assertNotIn(0, self.dom.vcpu_pins)

    def test_emulator_pin(self):
        self.apply(Kind.EMULATOR, None, '1,3')
        self.assertEqual((1, 3), self.dom.emulator_pin)

    def test_iothread_pin(self):
        self.apply(Kind.IOTHREAD, 1, '0-1')
        self.assertEqual({1: (0, 1)}, self.dom.iothread_pins)

    def test_numa_nodeset(self):
        self.apply(Kind.NUMA, None, '0')
        self.assertEqual('0', self.dom.numa_nodeset)

    def test_thread_pins_are_every_kind_but_the_nodeset(self):
        self.assertEqual({Kind.VCPU, Kind.EMULATOR, Kind.IOTHREAD},
                         {k for k in Kind if k.thread_pin})
