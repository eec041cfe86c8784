"""qemuproof: a pid from libvirt is read only when proven to be the guest's
qemu; otherwise its facts are unknown, said once."""

import logging
import os

import fixtures
import testtools

from nova_pinning_hooks.host import qemuproof

QEMU = (b'/usr/bin/qemu-system-x86_64\0-name\0guest=%s,debug-threads=on\0'
        b'-S\0-uuid\0d8c5b1b5-4c1e-4cf8-9e1c-5a3f4e0b2d11\0')


class TestNamesGuest(testtools.TestCase):

    def test_libvirt_form(self):
        self.assertTrue(qemuproof.names_guest(QEMU % b'g1', 'g1'))

    def test_other_guest(self):
        self.assertFalse(qemuproof.names_guest(QEMU % b'g10', 'g1'))
        self.assertFalse(qemuproof.names_guest(QEMU % b'g1', 'g10'))

    def test_doubled_comma_is_a_comma(self):
        self.assertTrue(qemuproof.names_guest(QEMU % b'a,,b', 'a,b'))
        self.assertFalse(qemuproof.names_guest(QEMU % b'a,,b', 'a'))

    def test_bare_name_of_older_libvirt(self):
        self.assertTrue(qemuproof.names_guest(b'qemu\0-name\0g1\0', 'g1'))

    def test_no_name_argument(self):
        self.assertFalse(qemuproof.names_guest(b'sleep\0600\0', 'g1'))
        self.assertFalse(qemuproof.names_guest(b'x\0-name', '-name'))
        self.assertFalse(qemuproof.names_guest(b'', 'g1'))


class TestProof(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.proc = self.useFixture(fixtures.TempDir()).path
        self.log = self.useFixture(fixtures.FakeLogger(
            level=logging.DEBUG, format='%(levelname)s %(message)s'))
        self.proof = qemuproof.Proof(self.proc)
        self.now = [1000.0]
        self.proof.clock = lambda: self.now[0]

    def process(self, pid, cmdline, started=777):
        d = os.path.join(self.proc, str(pid))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, 'cmdline'), 'wb') as f:
            f.write(cmdline)
        with open(os.path.join(d, 'stat'), 'wb') as f:
            # comm with a space and a ')' in it; field 22 is the start time
            f.write(b'%d (CPU 0) x) S' % pid + b' 1' * 18 +
                    b' %d 5 6\n' % started)

    def test_proven_pid_is_read(self):
        self.process(42, QEMU % b'g1')
        self.assertEqual({'0': 1}, self.proof.read('g1', 42,
                                                    lambda pid: {'0': 1}))
        self.assertEqual({}, self.proof.unknown())
        self.assertEqual('', self.log.output)

    def test_another_process_is_never_read(self):
        self.process(42, b'sleep\0600\0')
        read = []
        for _ in range(3):
            self.assertIsNone(self.proof.read('g1', 42, read.append))
        self.assertEqual([], read)
        self.assertIn('is not its qemu', self.proof.unknown()['g1'])
        # Said once, not once a pass; a warning once it persists.
        self.assertEqual(1, self.log.output.count('not proven'))
        self.assertEqual(0, self.log.output.count('WARNING'))
        self.now[0] += qemuproof.PERSISTS
        for _ in range(3):
            self.assertIsNone(self.proof.read('g1', 42, read.append))
        self.assertEqual([], read)
        self.assertEqual(1, self.log.output.count('WARNING'))
        self.assertIn('not proven to be its qemu for 10 s',
                      self.log.output)

    def test_a_transient_refusal_is_no_warning(self):
        # Issue 34 R5: in a burst of boots the pid was read before
        # libvirt's child exec'd qemu (18 warnings in an afternoon); the
        # next read proved it. Debug only, and forgotten once proven.
        self.process(42, b'/usr/sbin/libvirtd\0--timeout\x00120\0')
        self.assertIsNone(self.proof.read('g1', 42, lambda pid: 1))
        self.assertEqual(['DEBUG'], [line.split()[0] for line in
                                     self.log.output.splitlines()])
        self.assertIn('g1', self.proof.unknown())
        self.now[0] += 0.2
        self.process(42, QEMU % b'g1')  # exec'd
        self.assertEqual(1, self.proof.read('g1', 42, lambda pid: 1))
        self.assertEqual({}, self.proof.unknown())
        self.now[0] += qemuproof.PERSISTS
        self.assertEqual(1, self.proof.read('g1', 42, lambda pid: 1))
        self.assertNotIn('WARNING', self.log.output)

    def test_missing_process(self):
        self.assertIsNone(self.proof.read('g1', 42, lambda pid: 1))
        self.assertEqual({'g1': 'no process 42 here'}, self.proof.unknown())

    def test_replaced_while_read_gives_nothing(self):
        self.process(42, QEMU % b'g1', started=1)

        def reader(pid):
            self.process(42, QEMU % b'g1', started=2)  # a new process
            return {'0': 1}
        self.assertIsNone(self.proof.read('g1', 42, reader))
        self.assertIn('replaced', self.proof.unknown()['g1'])

    def test_link_is_not_followed(self):
        self.process(7, QEMU % b'g1')
        os.makedirs(os.path.join(self.proc, '42'))
        for name in ('cmdline', 'stat'):
            os.symlink(os.path.join(self.proc, '7', name),
                       os.path.join(self.proc, '42', name))
        self.assertIsNone(self.proof.read('g1', 42, lambda pid: 1))
        self.assertIn('unreadable', self.proof.unknown()['g1'])

    def test_proven_again_is_forgotten_then_said_again(self):
        self.process(42, b'sleep\0')
        self.proof.read('g1', 42, lambda pid: 1)
        self.process(42, QEMU % b'g1')
        self.assertEqual(1, self.proof.read('g1', 42, lambda pid: 1))
        self.assertEqual({}, self.proof.unknown())
        self.process(42, b'sleep\0')
        self.proof.read('g1', 42, lambda pid: 1)
        self.assertEqual(2, self.log.output.count('not proven'))

    def test_new_pid_is_said_again(self):
        self.proof.read('g1', 42, lambda pid: 1)
        self.proof.read('g1', 43, lambda pid: 1)
        self.assertEqual(2, self.log.output.count('not proven'))
