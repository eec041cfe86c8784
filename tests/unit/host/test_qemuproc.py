"""``qemuproc.vcpu_affinity``: the one reader of vCPU affinity (passes
compare it with libvirt's pins; the isolation agent's pin map finds the
one-to-one CPUs from it), read from a /proc the test builds and checked
against the kernel's own answer."""

import os
import threading

import fixtures
import testtools

from nova_pinning_hooks.host import qemuproc


def _thread(proc, pid, tid, comm, status):
    d = os.path.join(proc, str(pid), 'task', str(tid))
    os.makedirs(d)
    with open(os.path.join(d, 'comm'), 'wb') as f:
        f.write(comm + b'\n')
    if status is not None:
        with open(os.path.join(d, 'status'), 'wb') as f:
            f.write(status)
    return d


class TestVcpuAffinity(testtools.TestCase):

    def test_from_each_vcpu_threads_status(self):
        proc = self.useFixture(fixtures.TempDir()).path
        _thread(proc, 7, 7, b'qemu-system-x86', b'Cpus_allowed_list:\t0-3\n')
        _thread(proc, 7, 10, b'CPU 0/KVM',
                b'Name:\tCPU 0/KVM\nCpus_allowed:\t4\n'
                b'Cpus_allowed_list:\t2\n')
        _thread(proc, 7, 11, b'CPU 1/KVM', b'Cpus_allowed_list:\t0-1,3\n')
        # Ended between the listing and the read: left out.
        _thread(proc, 7, 12, b'CPU 2/KVM', None)
        # A link instead of a status file is not followed.
        d = _thread(proc, 7, 13, b'CPU 3/KVM', None)
        os.symlink(os.path.join(proc, '7', 'task', '10', 'status'),
                   os.path.join(d, 'status'))
        # Garbage in the line: left out, never an error.
        _thread(proc, 7, 14, b'CPU 4/KVM', b'Cpus_allowed_list:\tx-y\n')
        self.assertEqual({0: frozenset([2]), 1: frozenset([0, 1, 3])},
                         qemuproc.vcpu_affinity(7, proc))
        self.assertEqual({}, qemuproc.vcpu_affinity(8, proc))

    def test_a_status_file_too_large_is_not_read(self):
        proc = self.useFixture(fixtures.TempDir()).path
        _thread(proc, 7, 10, b'CPU 0/KVM',
                b'Cpus_allowed_list:\t2\n' +
                b'x' * qemuproc.STATUS_LIMIT)
        self.assertEqual({}, qemuproc.vcpu_affinity(7, proc))

    def test_the_kernels_own_answer(self):
        # The real /proc: what sched_getaffinity says of this thread.
        self.assertEqual(
            frozenset(os.sched_getaffinity(0)),
            qemuproc.thread_affinity(os.getpid(), threading.get_native_id()))
