"""The host's vCPU counters: ``virt.Host.vcpu_stats`` (one bulk call,
schedstat as fallback) and qemu's schedstat files read safely."""

import os

import testtools

from nova_pinning_hooks.host import libvirtapi
from nova_pinning_hooks.host import qemuproc
from nova_pinning_hooks.host import virt
from tests.fixtures import FakeLibvirtFixture
from tests.fixtures import host_options
from tests.unit import hosts

S = 1_000_000_000  # ns in a second


class TestSampling(testtools.TestCase):
    """``virt.Host.vcpu_stats``: one bulk call, schedstat as fallback."""

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        self.host = virt.Host('qemu:///system', host_options())
        self.addCleanup(self.host.close)

    def test_one_call_for_the_whole_host(self):
        for i in range(5):
            dom = self.fake.add_domain('g%d' % i, 2)
            dom.vcpu_time[1] = 7 * S
            dom.vcpu_delay[1] = i
        self.fake.add_domain('off', 1, active=False)
        taken, sample = self.host.vcpu_stats()
        self.assertEqual(1, self.fake.calls['getAllDomainStats'])
        self.assertEqual(1, self.host.calls['getAllDomainStats'])
        self.assertEqual(5, len(sample))
        g3 = self.fake.by_name('g3').UUIDString()
        self.assertEqual({'name': 'g3', 'vcpus': {
            0: {'time': 0, 'delay': 0}, 1: {'time': 7 * S, 'delay': 3}}},
            sample[g3])
        self.assertIsInstance(taken, float)

    def test_schedstat_where_libvirt_lacks_delay(self):
        dom = self.fake.add_domain('old', 1)
        dom.report_delay = False
        dom.vcpu_time[0] = 99
        seen = []

        def schedstat(pid, proc='/proc'):
            seen.append(pid)
            return {0: (11, 22)}
        self.patch(libvirtapi, 'qemu_pid', lambda name, run_dir: 4242)
        # The pid is taken as that guest's qemu (qemuproof proves it).
        self.patch(self.host.proof, 'read',
                   lambda name, pid, reader: reader(pid))
        self.patch(qemuproc, 'vcpu_schedstat', schedstat)
        _, sample = self.host.vcpu_stats()
        # Both counters from schedstat, never libvirt's time with it.
        self.assertEqual({0: {'time': 11, 'delay': 22}},
                         sample[dom.UUIDString()]['vcpus'])
        self.assertEqual([4242], seen)


class TestSchedstatFile(testtools.TestCase):

    def test_reads_vcpu_threads_schedstat(self):
        proc = self.useFixture(__import__('fixtures').TempDir()).path
        for tid, comm, stat in ((10, b'CPU 0/KVM', b'500 70 3\n'),
                                (11, b'CPU 1/KVM', b'900 0 1\n'),
                                (12, b'qemu-system-x86', b'1 1 1\n'),
                                (13, b'CPU 2/KVM', b'garbage\n')):
            d = os.path.join(proc, '99', 'task', str(tid))
            os.makedirs(d)
            with open(os.path.join(d, 'comm'), 'wb') as f:
                f.write(comm + b'\n')
            with open(os.path.join(d, 'schedstat'), 'wb') as f:
                f.write(stat)
        # A link instead of a file is not followed.
        d = os.path.join(proc, '99', 'task', '14')
        os.makedirs(d)
        with open(os.path.join(d, 'comm'), 'wb') as f:
            f.write(b'CPU 3/KVM\n')
        os.symlink(os.path.join(proc, '99', 'task', '10', 'schedstat'),
                   os.path.join(d, 'schedstat'))
        self.assertEqual({0: (500, 70), 1: (900, 0)},
                         qemuproc.vcpu_schedstat(99, proc))
