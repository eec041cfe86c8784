"""Bursts of pass requests collapse into few passes; callers never wait."""

import threading
import time

import testtools

from nova_pinning_hooks.passes import coalescer


class Recorder:
    """A pass function that can be held in the middle of a pass."""

    def __init__(self, fail=False):
        self.started = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.passes = 0
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            self.passes += 1
        self.started.set()
        self.release.wait(10)
        if self.fail:
            raise RuntimeError('pass blew up')


class TestCoalescer(testtools.TestCase):

    def make(self, run, delay=0.0):
        c = coalescer.Coalescer(run, delay=delay)
        self.addCleanup(c.stop)
        return c

    def test_request_returns_at_once_while_a_pass_runs(self):
        run = Recorder()
        run.release.clear()
        c = self.make(run)
        c.request('first')
        self.assertTrue(run.started.wait(5))
        # A request that waited for the running pass would wait until
        # this watchdog ends it, 20 s on; the bound tells the two apart
        # however loaded the machine is.
        watchdog = threading.Timer(20, run.release.set)
        self.addCleanup(watchdog.cancel)
        watchdog.start()
        start = time.monotonic()
        for i in range(40):
            self.assertTrue(c.request('burst %d' % i))
        self.assertLess(time.monotonic() - start, 10)
        run.release.set()
        self.assertTrue(c.request('wait', wait=True, timeout=10))
        # The first pass, one for the whole burst, maybe one for 'wait'.
        self.assertLessEqual(run.passes, 3)
        self.assertGreaterEqual(run.passes, 2)

    def test_burst_before_worker_wakes_is_one_pass(self):
        run = Recorder()
        c = self.make(run, delay=0.3)
        for i in range(40):
            c.request('boot %d' % i)
        self.assertTrue(c.request('last', wait=True, timeout=10))
        self.assertEqual(1, run.passes)

    def test_wait_sees_a_pass_that_started_after_the_request(self):
        run = Recorder()
        run.release.clear()
        c = self.make(run)
        c.request('first')
        self.assertTrue(run.started.wait(5))
        waiter = []
        t = threading.Thread(target=lambda: waiter.append(
            c.request('mine', wait=True, timeout=10)))
        t.start()
        time.sleep(0.1)
        self.assertEqual([], waiter)  # the running pass does not count
        run.release.set()
        t.join(10)
        self.assertEqual([True], waiter)
        self.assertEqual(2, run.passes)

    def test_failing_pass_does_not_kill_the_worker(self):
        run = Recorder(fail=True)
        c = self.make(run)
        self.assertTrue(c.request('a', wait=True, timeout=10))
        self.assertTrue(c.request('b', wait=True, timeout=10))
        self.assertEqual(2, run.passes)

    def test_wait_times_out(self):
        run = Recorder()
        run.release.clear()
        c = self.make(run)
        self.assertFalse(c.request('slow', wait=True, timeout=0.2))
        run.release.set()

    def test_stopped_coalescer_refuses(self):
        c = self.make(Recorder())
        c.stop()
        self.assertFalse(c.request('late'))
