"""The binding service every mode runs (``runtime.service``): passes on
events and requests, bursts coalesced, vCPU count polls, the requests
stream of nova's worker, a clean stop."""

import io
import threading
import time

import fixtures

from nova_pinning_hooks.runtime import service
from nova_pinning_hooks.runtime import settings as runtime_settings
from tests.unit import hosts
from tests.unit.passes.test_incremental import IncrementalTestCase


class TestBindingService(IncrementalTestCase):

    def running_agent(self):
        """An agent running on its own thread, its first pass done."""
        agent = service.BindingService(runtime_settings.read(self.conf),
                                       service.Role(event_loop=False))
        stop = threading.Event()
        thread = threading.Thread(target=agent.run, args=(stop,))
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(stop.set)
        self.assertTrue(agent.coalescer.request('settle', wait=True,
                                                timeout=10))
        return agent, stop, thread

    def test_event_storm_is_one_or_two_passes_and_stop_is_clean(self):
        self.cf.config(group='nova_pinning', coalesce_delay=0.2,
                       resync_interval=0)
        agent, stop, thread = self.running_agent()
        a = self.boot('a', 2)
        passes = agent.coalescer.passes
        for _ in range(100):
            self.fake.emit(a, 'TUNABLE', {})
        self.assertTrue(agent.coalescer.request('settle', wait=True,
                                                timeout=10))
        self.assertLessEqual(agent.coalescer.passes - passes, 3)
        self.assertEqual(2, len(a.vcpu_pins))
        stop.set()
        thread.join(10)
        self.assertFalse(thread.is_alive())
        self.assertTrue(self.fake.connections[-1].closed)

    def test_a_hot_plugged_vcpu_is_bound_by_the_poll(self):
        # libvirt raises no event for "virsh setvcpus --live" (seen on
        # libvirt 9.0); resync is off here, so only the poll can see it.
        self.cf.config(group='nova_pinning', coalesce_delay=0,
                       resync_interval=0, vcpu_poll_interval=0.05)
        a = self.fake.add_domain('a', 1, xml=hosts.domain_xml(
            'a', 2, current=1), memory_by_node_kib={'0': 65536})
        agent, stop, thread = self.running_agent()
        self.assertEqual([0], sorted(a.vcpu_pins))
        passes = []
        run_pass = agent.reconciler.run_pass
        self.useFixture(fixtures.MockPatchObject(
            agent.reconciler, 'run_pass',
            side_effect=lambda: passes.append(1) or run_pass()))
        stats = agent.pass_metrics.stats

        def counted():
            with stats._lock:  # a poll counts both at once
                return (stats.polls, dict(stats.calls),
                        sum(stats.passes.values()))

        # Polls that find nothing run no pass; each asks every running
        # guest's count, a call that never reaches qemu (no bulk stats:
        # those ask every guest's monitor). The first pass's own pins
        # raise tunable events, and "agent start" may be requested after
        # the first settle: the passes those ask for run in the first
        # windows, so the test waits for a window with none (a poll that
        # ran passes would never give one).
        deadline = time.monotonic() + 10
        while True:
            del passes[:]
            polls = self.fake.calls['vcpusFlags']
            bulk = self.fake.calls['getAllDomainStats']
            polls_before, calls_before, passes_before = counted()
            time.sleep(0.5)
            polls_after, calls_after, passes_after = counted()
            # none started, none (begun before) ended in the window
            quiet = not passes and passes_after == passes_before
            if quiet or time.monotonic() > deadline:
                break
        self.assertEqual([], passes)
        self.assertEqual(passes_before, passes_after)
        self.assertGreater(self.fake.calls['vcpusFlags'], polls)
        self.assertEqual(bulk, self.fake.calls['getAllDomainStats'])
        # Their calls are the agent's cost on a quiet host: counted,
        # though no pass ran (a listing and one call a guest each).
        self.assertGreater(polls_after, polls_before)
        self.assertEqual(2 * (polls_after - polls_before),
                         calls_after['read'] - calls_before['read'])
        self.assertEqual(calls_before['write'], calls_after['write'])
        a.vcpus = 2
        a.base_xml = hosts.domain_xml('a', 2, current=2)
        deadline = time.monotonic() + 10
        while sorted(a.vcpu_pins) != [0, 1] and \
                time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual([0, 1], sorted(a.vcpu_pins))

    def test_a_request_line_is_read_in_bounded_pieces(self):
        agent = service.BindingService(runtime_settings.read(self.conf),
                                       service.Role(events=False))
        self.addCleanup(agent.stop)
        seen, stop = [], threading.Event()
        agent.request = seen.append
        agent._read_requests(io.StringIO('x' * 1000 + '\nlast\n'), stop)
        self.assertEqual(['x' * 200] * 5 + ['last'], seen)
        self.assertTrue(stop.is_set())  # its end stops the agent

    def test_requests_stream_end_stops_it(self):
        agent = service.BindingService(runtime_settings.read(self.conf),
                                       service.Role(event_loop=False))
        done = threading.Event()
        thread = threading.Thread(
            target=lambda: (agent.run(requests=io.StringIO('a\nb\n')),
                            done.set()))
        thread.start()
        thread.join(10)
        self.assertTrue(done.is_set())
