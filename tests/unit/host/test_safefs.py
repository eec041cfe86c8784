"""safefs and timedcall: how the package touches files and bounds a
call (the pass lock: tests/unit/passes/test_passlock.py). (Ownership
across users is proven on the real kernel with an unprivileged user in
tests/functional.)"""

import os
import signal
import stat
import threading
import time

import fixtures
import testtools

from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.host import timedcall


class Alarm(fixtures.Fixture):
    """Fail instead of hanging: a blocking open would never return."""

    def __init__(self, seconds=10):
        self.seconds = seconds

    def _setUp(self):
        def ring(*_):
            raise AssertionError('blocked for %d s' % self.seconds)
        old = signal.signal(signal.SIGALRM, ring)
        signal.alarm(self.seconds)
        self.addCleanup(signal.signal, signal.SIGALRM, old)
        self.addCleanup(signal.alarm, 0)


class Umask(fixtures.Fixture):
    def __init__(self, mask):
        self.mask = mask

    def _setUp(self):
        self.addCleanup(os.umask, os.umask(self.mask))


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


class TestRead(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.useFixture(Alarm())

    def path(self, name):
        return os.path.join(self.tmp, name)

    def test_reads_a_small_regular_file(self):
        with open(self.path('f'), 'wb') as f:
            f.write(b'{"a": 1}')
        self.assertEqual(b'{"a": 1}', safefs.read_file(self.path('f'), 100))

    def test_refuses_what_is_not_a_small_regular_file(self):
        with open(self.path('big'), 'wb') as f:
            f.write(b'x' * 101)
        os.mkfifo(self.path('fifo'))
        os.symlink(self.path('big'), self.path('link'))
        os.mkdir(self.path('dir'))
        cases = [('big', 'larger than 100 bytes'),
                 ('fifo', 'not a regular file'),
                 ('link', 'symbolic link'),
                 ('dir', 'not a regular file')]
        for name, why in cases:
            exc = self.assertRaises(safefs.UnsafeFileError, safefs.read_file,
                                    self.path(name), 100)
            self.assertIn(why, str(exc), name)
        exc = self.assertRaises(safefs.UnsafeFileError, safefs.read_file,
                                '/dev/zero', 100)
        self.assertIn('not a regular file', str(exc))
        self.assertRaises(FileNotFoundError, safefs.read_file,
                          self.path('absent'), 100)

    def test_private_refuses_a_file_others_may_write(self):
        with open(self.path('f'), 'w') as f:
            f.write('{}')
        os.chmod(self.path('f'), 0o622)
        exc = self.assertRaises(safefs.UnsafeFileError, safefs.read_file,
                                self.path('f'), 100, private=True)
        self.assertIn('not trusted', str(exc))
        os.chmod(self.path('f'), 0o600)
        self.assertEqual(b'{}', safefs.read_file(self.path('f'), 100,
                                                 private=True))

    def test_config_files_are_looked_at_not_opened(self):
        os.mkfifo(self.path('fifo.conf'))
        self.assertRaises(safefs.UnsafeFileError,
                          safefs.check_readable_config,
                          self.path('fifo.conf'), 100)
        with open(self.path('big.conf'), 'w') as f:
            f.write('#' * 200)
        self.assertRaises(safefs.UnsafeFileError,
                          safefs.check_readable_config,
                          self.path('big.conf'), 100)


class TestWrite(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_modes_do_not_depend_on_the_umask(self):
        self.useFixture(Umask(0))
        path = os.path.join(self.tmp, 'a', 'b', 'state.json')
        statefile.write_json(path, {'x': 1})
        statefile.write_json(path + '2', {'x': 1}, mode=0o600)
        self.assertEqual(0o644, mode(path))
        self.assertEqual(0o600, mode(path + '2'))
        self.assertEqual(0o755, mode(os.path.join(self.tmp, 'a')))
        self.assertEqual(0o755, mode(os.path.join(self.tmp, 'a', 'b')))
        self.assertEqual({'x': 1}, statefile.read_json(path))

    def test_refuses_a_directory_others_can_write(self):
        os.chmod(self.tmp, 0o777)
        exc = self.assertRaises(safefs.UnsafeFileError, statefile.write_json,
                                os.path.join(self.tmp, 'f.json'), {})
        self.assertIn('writable by a user other than', str(exc))
        self.assertEqual([], os.listdir(self.tmp))

    def test_refuses_a_link_on_the_way(self):
        real = os.path.join(self.tmp, 'real')
        os.mkdir(real)
        os.symlink(real, os.path.join(self.tmp, 'via'))
        exc = self.assertRaises(safefs.UnsafeFileError, statefile.write_json,
                                os.path.join(self.tmp, 'via', 'f.json'), {})
        self.assertIn('not a directory (or a link)', str(exc))
        self.assertEqual([], os.listdir(real))

    def test_a_link_at_the_target_is_replaced_not_followed(self):
        victim = os.path.join(self.tmp, 'victim')
        with open(victim, 'w') as f:
            f.write('keep')
        os.chmod(victim, 0o640)
        target = os.path.join(self.tmp, 'f.json')
        os.symlink(victim, target)
        statefile.write_json(target, {'a': 1}, mode=0o600)
        self.assertFalse(os.path.islink(target))
        with open(victim) as f:
            self.assertEqual('keep', f.read())
        self.assertEqual(0o640, mode(victim))

    def test_stale_temporaries_are_removed(self):
        path = os.path.join(self.tmp, 'state.json')
        statefile.write_json(path, {})
        for name in ('.state.json.0123456789ab.tmp', '.state.json.x.tmp'):
            with open(os.path.join(self.tmp, name), 'w') as f:
                f.write('half')
        other = os.path.join(self.tmp, '.other.json.0123.tmp')
        open(other, 'w').close()
        self.assertEqual(2, safefs.remove_stale_temporaries(path))
        self.assertEqual(sorted(['state.json', '.other.json.0123.tmp']),
                         sorted(os.listdir(self.tmp)))

    def test_a_failed_write_leaves_no_temporary(self):
        path = os.path.join(self.tmp, 'f.json')
        statefile.write_json(path, {'old': 1})
        with fixtures.MonkeyPatch('os.fsync', self._fail):
            self.assertRaises(OSError, statefile.write_json, path, {})
        self.assertEqual(['f.json'], os.listdir(self.tmp))
        self.assertEqual({'old': 1}, statefile.read_json(path))

    @staticmethod
    def _fail(fd):
        raise OSError(28, 'No space left on device')


class TestTimedCall(testtools.TestCase):

    def test_results_and_errors_pass_through(self):
        w = timedcall.Worker()
        self.assertEqual(3, w.call(1, lambda a, b: a + b, 1, 2))
        self.assertRaises(KeyError, w.call, 1, {}.__getitem__, 'x')
        self.assertFalse(w.retired)

    def test_a_call_that_overruns_retires_the_worker(self):
        w = timedcall.Worker()
        release, cleaned = threading.Event(), threading.Event()
        start = time.monotonic()
        self.assertRaises(timedcall.CallTimeout, w.call, 0.2, release.wait)
        # release.wait would block for ever: any bound shows the timeout.
        self.assertLess(time.monotonic() - start, 10)
        self.assertTrue(w.retired)
        self.assertRaises(timedcall.CallTimeout, w.call, 5, int)
        w.retire(cleaned.set)
        self.assertFalse(cleaned.wait(0.2))  # not before the call returns
        release.set()
        self.assertTrue(cleaned.wait(5))
