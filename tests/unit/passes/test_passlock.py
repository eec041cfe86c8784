"""passlock: the pass lock, taken as safefs touches files (safefs:
tests/unit/host/test_safefs.py)."""

import os
import threading
import time

import fixtures
import testtools

from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.passes import passlock
from tests.unit.host.test_safefs import Umask
from tests.unit.host.test_safefs import mode


class TestPassLock(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_excludes_and_times_out(self):
        with passlock.PassLock(self.tmp, 1):
            start = time.monotonic()
            self.assertRaises(passlock.LockTimeout,
                              passlock.PassLock(self.tmp, 0.3).acquire)
            self.assertGreaterEqual(time.monotonic() - start, 0.3)
        with passlock.PassLock(self.tmp, 0):
            pass  # free again

    def test_waits_for_the_holder(self):
        first = passlock.PassLock(self.tmp, 1).acquire()
        threading.Timer(0.2, first.release).start()
        with passlock.PassLock(self.tmp, 5):
            self.assertIsNone(first.fd)

    def test_creates_nothing_and_follows_no_link(self):
        self.useFixture(Umask(0))
        lock_dir = os.path.join(self.tmp, 'locks')
        with passlock.PassLock(lock_dir, 1):
            self.assertEqual([], os.listdir(lock_dir))
        self.assertEqual(0o755, mode(lock_dir))
        os.symlink(lock_dir, os.path.join(self.tmp, 'link'))
        self.assertRaises(safefs.UnsafeFileError, passlock.PassLock(
            os.path.join(self.tmp, 'link'), 1).acquire)
