"""Concurrent scrapes of one endpoint share the read in flight (issue 40,
M-1: 5 scrapes of a 2 s read answered at 2, 4, 6, 8 and 10 s)."""

import threading
import time

import fixtures
import testtools

from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import singleflight
from tests.unit.scrape import value

READ = 1.0  # seconds one read of the host takes here


class TestScrapesShareOneRead(testtools.TestCase):

    def test_five_concurrent_scrapes_of_a_slow_read_end_together(self):
        reads = []

        def slow_read(rec, conf, plan=None):
            reads.append(threading.get_ident())
            time.sleep(READ)
            return metrics.HostView(isolation={'state': 'applied',
                                               'mode': 'v1',
                                               'confined': len(reads)})
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.observe.metrics.read_view', slow_read))
        collector = metrics.LiveCollector(None, None)
        start = time.monotonic()
        ended, texts = [], []

        def scrape():
            texts.append(collector.render().decode())
            ended.append(time.monotonic() - start)
        threads = [threading.Thread(target=scrape) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(5, len(ended))
        # One read (two if a scrape arrived as the first ended), never
        # five in a row.
        self.assertLessEqual(len(reads), 2)
        self.assertLess(max(ended), 2 * READ + 0.5, ended)
        # Each scrape answered with a read's result (the first's,
        # shared, or the second's).
        seen = {value(t, 'nova_pinning_isolation_confined_processes')
                for t in texts}
        self.assertTrue(seen <= {1, 2} and 1 in seen, seen)
        # The next scrape reads afresh.
        collector.render()
        self.assertEqual(len(reads), collector._flight.calls)


class TestSingleFlight(testtools.TestCase):

    def test_one_call_in_flight_its_result_or_error_shared(self):
        flight = singleflight.SingleFlight()
        gate, entered = threading.Event(), threading.Event()
        calls = []

        def fn():
            calls.append(1)
            entered.set()
            gate.wait(10)
            if len(calls) == 1:
                raise RuntimeError('libvirt fell over')
            return len(calls)
        results = []

        def call():
            try:
                results.append(flight.do(fn))
            except RuntimeError as exc:
                results.append(str(exc))
        first = threading.Thread(target=call)
        first.start()
        self.assertTrue(entered.wait(10))
        others = [threading.Thread(target=call) for _ in range(3)]
        for t in others:
            t.start()
        # They joined the call in flight (counted as they join, before
        # they wait): not a fixed time, which a loaded host outlasts.
        deadline = time.monotonic() + 60
        while flight.shared < 3:
            self.assertLess(time.monotonic(), deadline, flight.shared)
            time.sleep(0.01)
        gate.set()
        for t in [first] + others:
            t.join(10)
        self.assertEqual(['libvirt fell over'] * 4, results)
        self.assertEqual((1, 3), (flight.calls, flight.shared))
        self.assertEqual(2, flight.do(fn))  # a new call, not the old result

    def test_a_joining_caller_waits_a_bounded_time(self):
        flight = singleflight.SingleFlight(wait=0.2)
        gate = threading.Event()
        leader = threading.Thread(target=flight.do,
                                  args=(lambda: gate.wait(10),))
        leader.start()
        self.addCleanup(leader.join, 10)
        self.addCleanup(gate.set)
        deadline = time.monotonic() + 60
        while flight.calls < 1:  # the leader's call is in flight
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.01)
        start = time.monotonic()
        self.assertRaises(TimeoutError, flight.do, lambda: None)
        self.assertLess(time.monotonic() - start, 2)
