"""A hung libvirtd: threads and descriptors stay flat, and it recovers.

The daemon is a UNIX socket that accepts connections and never answers,
reached by the real libvirt client library (libvirt-python) through
``qemu+unix:///system?socket=...``: every call blocks until the socket
closes.
"""

import os
import socket
import threading

import fixtures
import testtools

from nova_pinning_hooks.host import hung
from nova_pinning_hooks.host import libvirtapi
from nova_pinning_hooks.host import virt
from tests.fixtures import host_options

try:
    import libvirt
except ImportError:  # pragma: no cover - a requirement of the package
    libvirt = None


class SilentDaemon:
    """Accepts and never answers, until ``close()``."""

    def __init__(self, path):
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(64)
        self.clients = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.clients.append(conn)

    def close(self):
        self.server.close()
        for c in self.clients:
            c.close()


def counts():
    return (len(os.listdir('/proc/self/task')),
            len(os.listdir('/proc/self/fd')))


class TestHungDaemon(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if libvirt is None:
            self.fail('libvirt-python is required')
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.libvirtapi.libvirt', libvirt))
        libvirtapi.quiet_errors()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(tmp, 'libvirt-sock')
        self.daemon = SilentDaemon(self.path)
        self.addCleanup(self.daemon.close)
        self.uri = 'qemu+unix:///system?socket=%s' % self.path

    def connect(self):
        """One scrape or pass: a new Host, as the exporter makes."""
        host = virt.Host(self.uri, host_options())
        host.call_timeout = 0.2
        try:
            host.connection()
        except (libvirtapi.LibvirtTimeout, libvirt.libvirtError) as exc:
            return str(exc)
        finally:
            host.close()
        return 'connected'

    def test_threads_and_descriptors_stay_flat_and_it_recovers(self):
        before = counts()
        first = self.connect()
        self.assertIn('did not return within', first)
        # The daemon's end of that connection is a descriptor of this
        # process too, made by the daemon's own thread: wait for it
        # rather than count before it exists on a loaded machine.
        for _ in range(100):
            if self.daemon.clients:
                break
            threading.Event().wait(0.05)
        self.assertEqual(1, len(self.daemon.clients))
        after_first = counts()
        for _ in range(40):
            self.assertIn('libvirtd does not answer', self.connect())
        # One abandoned call (its thread; its socket, the daemon's end of
        # it, which lives in this process too, and libvirt's own wakeup
        # pipe), however many passes and scrapes followed it.
        self.assertEqual(after_first, counts())
        self.assertLessEqual(after_first[0] - before[0], 1)
        self.assertLessEqual(after_first[1] - before[1], 4)

        # The daemon goes away (its socket closes): the blocked call
        # returns, and calls reach for the daemon again by themselves.
        self.daemon.close()
        os.unlink(self.path)
        for _ in range(50):
            if not any(t.name == 'nova-pinning-libvirt'
                       for t in threading.enumerate()):
                break
            threading.Event().wait(0.1)
        again = self.connect()
        self.assertNotIn('does not answer', again)
        self.assertIn('Failed to connect socket', again)
        # Every thread ends (the workers retire once their call returns).
        for _ in range(50):
            if counts()[0] <= before[0]:
                break
            threading.Event().wait(0.1)
        self.assertLessEqual(counts()[0], before[0])

    def test_forgotten_once_the_call_returns(self):
        class Done:
            def alive(self):
                return False
        hung.abandoned('test:///x', Done())
        hung.check('test:///x')  # no raise
        self.assertNotIn('test:///x', hung._hung)
