"""tools/lib/common.sh's process helpers, which tools/cloud.sh's stops
and restarts stand on (issue 47): a process counts as running until it
has ended (a zombie has), ``stop_proc`` returns only once it has, and
``wait_gone``'s bound is time, not a count of tries (a fake clock here).

Each case runs bash on the real file, with RUN and LOG in a temporary
directory; the processes are this test's own children."""

import os
import signal
import subprocess
import sys
import time

import fixtures
import testtools

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
COMMON = os.path.join(TOP, 'tools', 'lib', 'common.sh')


def start_time(pid):
    with open('/proc/%d/stat' % pid) as f:
        return f.read().rsplit(')', 1)[1].split()[19]


def state(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0]
    except OSError:
        return None


class CommonShTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.run_dir = self.useFixture(fixtures.TempDir()).path

    def bash(self, script, timeout=120):
        """``script`` after sourcing common.sh; (exit status, stdout,
        stderr, seconds)."""
        start = time.monotonic()
        proc = subprocess.run(
            ['bash', '-c', 'set -euo pipefail; RUN=$1; LOG=$1; . "$2"; '
             + script, 'test', self.run_dir, COMMON],
            capture_output=True, text=True, timeout=timeout)
        return (proc.returncode, proc.stdout.strip(), proc.stderr.strip(),
                time.monotonic() - start)

    def child(self, setup=''):
        """A Python child of this test (never reaped until cleanup),
        sleeping once ``setup`` ran, recorded under RUN as ``name`` the
        way ``record`` does."""
        proc = subprocess.Popen(
            [sys.executable, '-c', 'import signal, time\n%s\n'
             'print("ready", flush=True)\ntime.sleep(300)' % setup],
            start_new_session=True, stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.wait, 10)
        self.addCleanup(self._kill, proc)
        self.assertEqual('ready\n', proc.stdout.readline())
        with open(os.path.join(self.run_dir, 'name.pid'), 'w') as f:
            f.write('%d %s\n' % (proc.pid, start_time(proc.pid)))
        return proc

    @staticmethod
    def _kill(proc):
        if proc.poll() is None:
            proc.kill()


class TestRunning(CommonShTestCase):

    def test_a_live_process_is_alive(self):
        proc = self.child()
        self.assertEqual((0, str(proc.pid)), self.bash('pid_of name')[:2])

    def test_a_zombie_is_not_alive(self):
        # Killed, not yet reaped (its parent, this test, has not waited):
        # it has ended; a start of its successor must not wait for it.
        proc = self.child()
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while state(proc.pid) != 'Z':
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        self.assertEqual(1, self.bash('alive name')[0])
        status, _, err, seconds = self.bash('stop_proc name 30')
        self.assertEqual((0, ''), (status, err))
        self.assertLess(seconds, 30)  # not waited for
        self.assertFalse(os.path.exists(
            os.path.join(self.run_dir, 'name.pid')))

    def test_another_process_on_the_pid_is_not_ours(self):
        proc = self.child()
        with open(os.path.join(self.run_dir, 'name.pid'), 'w') as f:
            f.write('%d 1\n' % proc.pid)  # another start time
        self.assertEqual(1, self.bash('alive name')[0])


class TestStopProc(CommonShTestCase):

    def test_a_process_deaf_to_term_is_killed_and_gone_on_return(self):
        proc = self.child('signal.signal(signal.SIGTERM, signal.SIG_IGN)')
        status, _, err, _ = self.bash('stop_proc name 1')
        self.assertEqual((0, ''), (status, err))
        # Ended when stop_proc returned: a zombie of this test's (its
        # parent) or gone; never still running.
        self.assertIn(state(proc.pid), ('Z', None))
        self.assertEqual(-signal.SIGKILL, proc.wait(10))
        self.assertFalse(os.path.exists(
            os.path.join(self.run_dir, 'name.pid')))

    def test_a_process_that_ends_on_term_is_not_killed(self):
        proc = self.child()
        status, _, err, seconds = self.bash('stop_proc name 60')
        self.assertEqual((0, ''), (status, err))
        # Ended on TERM (a zombie until this test reaps it): not waited
        # for up to the 60 s given to TERM.
        self.assertLess(seconds, 30)
        self.assertEqual(-signal.SIGTERM, proc.wait(10))


class TestWaitGone(CommonShTestCase):
    """``wait_gone``'s bound on a fake clock: ``date`` advances 7 s a
    reading (kept in a file: it is read in a subshell), ``sleep``
    returns at once."""

    FAKE_CLOCK = ('echo 1000 > "$RUN/clock"; date() { local t; '
                  't=$(( $(cat "$RUN/clock") + 7 )); '
                  'echo "$t" > "$RUN/clock"; echo "$t"; }; '
                  'sleep() { :; }; ')

    def test_the_bound_is_seconds_not_tries(self):
        # A process that never ends: running() always says so, counting.
        status, out, _, seconds = self.bash(
            self.FAKE_CLOCK + 'n=0; running() { n=$((n + 1)); }; '
            'if wait_gone 1 1 30; then echo gone; '
            'else echo "still $n"; fi')
        # 30 s on a clock that moves 7 s a reading: the deadline reading,
        # then four more (7, 14, 21, 28 s) below it, the fifth (35 s)
        # beyond it: five checks of the process, whatever the real time.
        self.assertEqual((0, 'still 5'), (status, out))
        self.assertLess(seconds, 30)

    def test_it_returns_once_the_process_ended(self):
        proc = self.child()
        st = start_time(proc.pid)
        proc.kill()
        proc.wait(10)
        status, out, _, _ = self.bash(
            self.FAKE_CLOCK + 'wait_gone %d %s 30 && echo gone'
            % (proc.pid, st))
        self.assertEqual((0, 'gone'), (status, out))
