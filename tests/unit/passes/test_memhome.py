"""The memory-home thread (issue 61): a pass over the fake libvirt homes
an arrived guest whose memory is split and binds it one-to-one; the
thread, fed by the pass's result, moves its memory home one guest at a
time, off the pass thread, retrying later, and counts what it did."""

import functools
import threading
import time

import fixtures
import testtools

from nova_pinning_hooks.host import memhome as memhome_host
from nova_pinning_hooks.host import virt
from nova_pinning_hooks.passes import memhome
from tests import fakelibvirt
from tests.fixtures import FakeLibvirtFixture
from tests.unit.passes import test_reconciler
from tests.unit import hosts

MIB = 1024
VM_2S = hosts.capabilities([[[0, 1], [2, 3]], [[4, 5], [6, 7]]],
                           memory_kib=1024 * MIB)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Recorder:
    """What ``passstats.PassStats.record_memory_home`` is handed."""

    def __init__(self):
        self.moves, self.calls = [], []

    def record_memory_home(self, result, calls):
        self.moves.append(result)
        self.calls.append(dict(calls))


class FakeAdapter:
    def __init__(self):
        self.calls = {'read': 0, 'write': 0}

    def close(self):
        pass


class MemoryHomeTestCase(test_reconciler.ReconcilerTestCase):
    """Passes as ``test_reconciler``'s, on the 2-socket VM's topology."""

    def setUp(self):
        super().setUp()
        # The last fixture registered is the daemon the passes reach.
        self.fake = self.useFixture(FakeLibvirtFixture(VM_2S)).host

    def arrive(self, name, vcpus, split, arrived=True):
        dom = self.fake.add_domain(
            name, vcpus, xml=hosts.domain_xml(name, vcpus,
                                              memory_kib=256 * MIB),
            memory_by_node_kib=split)
        dom.arrived = arrived
        return dom


class TestPassFeedsTheThread(MemoryHomeTestCase):

    def test_an_arrival_is_one_to_one_and_a_candidate(self):
        x = self.arrive('x', 2, {'0': 100 * MIB, '1': 156 * MIB})
        y = self.arrive('y', 2, {'0': 128 * MIB, '1': 128 * MIB},
                        arrived=False)
        result = self.rec.run_pass()
        self.assertIsNone(result.error)
        plans = {gp.name: gp for gp in result.plan.guests}
        self.assertEqual(('dedicated', 1, 'arrived'),
                         (plans['x'].mode, plans['x'].home_node,
                          plans['x'].home_source))
        self.assertEqual(2, len(set(x.vcpu_pins.values())))
        self.assertTrue(all(len(p) == 1 and p[0] in (4, 5, 6, 7)
                            for p in x.vcpu_pins.values()))
        # Born here with its memory split: cross-node, not moved.
        self.assertEqual('cross-node-range', plans['y'].mode)
        self.assertEqual(
            [memhome.Candidate(x.UUIDString(), 'x', 1, 100 * MIB,
                               frozenset((0, 1)))],
            memhome.candidates(result))
        # The pass wrote no memory policy: the thread moves its pages.
        self.assertEqual([], x.numa_history + y.numa_history)

    def test_only_guests_whose_nodeset_libvirt_changes_live(self):
        # libvirt changes a running guest's nodeset in restrictive mode
        # only (and once with no <numatune>: the usual guest).
        for mode, noted in (('restrictive', True), ('strict', False),
                            ('interleave', False), ('preferred', False)):
            name = 'x-' + mode
            xml = hosts.domain_xml(name, 2, memory_kib=256 * MIB).replace(
                '</domain>', "<numatune><memory mode='%s' nodeset='0-1'/>"
                "</numatune></domain>" % mode)
            dom = self.fake.add_domain(
                name, 2, xml=xml,
                memory_by_node_kib={'0': 100 * MIB, '1': 156 * MIB})
            dom.arrived = True
            found = memhome.candidates(self.rec.run_pass())
            self.assertEqual(noted, dom.UUIDString() in
                             [c.uuid for c in found], mode)
            self.fake.domains.pop(dom.UUIDString())

    def test_not_while_its_incoming_migration_holds_it(self):
        # The VM test's first live migration (issue 61): the pass during
        # the incoming job skipped the guest's pins, yet noted it, and
        # the move's nodeset write waited 3.9 s on that job.
        x = self.arrive('x', 2, {'0': 100 * MIB, '1': 156 * MIB})
        x.start_job(
            operation=fakelibvirt.VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN)
        self.addCleanup(lambda: x.job and x.job.set())
        held = self.rec.run_pass()
        self.assertTrue(held.skipped)
        self.assertEqual([], memhome.candidates(held))
        x.end_job()
        self.assertEqual(['x'], [c.name for c in
                                 memhome.candidates(self.rec.run_pass())])

    def test_a_dry_run_tells_nothing(self):
        self.arrive('x', 2, {'0': 100 * MIB, '1': 156 * MIB})
        self.assertIsNone(memhome.candidates(self.rec.run_pass(
            dry_run=True)))

    def test_moved_home_then_a_memory_home_with_the_same_pins(self):
        x = self.arrive('x', 2, {'0': 100 * MIB, '1': 156 * MIB})
        stats = Recorder()
        # Its own connection, as the service gives it.
        home = memhome.MemoryHome(
            lambda: virt.Host('qemu:///system', self.rec.config.host),
            stats, move=functools.partial(
                memhome_host.move, free_kib=lambda node: 900 * MIB))
        self.addCleanup(home.stop)
        result = self.rec.run_pass()
        pins = dict(x.vcpu_pins)
        home.after_pass(result)
        outcome = home.run_once()
        self.assertEqual('moved', outcome.result)
        self.assertEqual(['1', '0-1'], x.numa_history)
        # The kernel moved its pages (the fake's memory says so).
        x.memory_by_node_kib = {'1': 256 * MIB}
        again = self.rec.run_pass()
        plans = {gp.name: gp for gp in again.plan.guests}
        self.assertEqual(('dedicated', 1, 'memory'),
                         (plans['x'].mode, plans['x'].home_node,
                          plans['x'].home_source))
        self.assertEqual(pins, x.vcpu_pins)
        home.after_pass(again)
        self.assertIsNone(home.run_once())
        self.assertEqual({'moved': 1}, dict(home.counts))
        # Its libvirt calls counted: the connection's open and one
        # lookup, the strict nodeset and its widening.
        self.assertEqual((['moved'], [{'read': 2, 'write': 2}]),
                         (stats.moves, stats.calls))


class TestOneAtATime(testtools.TestCase):

    def candidates(self, *names):
        return [memhome.Candidate('u-' + n, n, 0, 1024, frozenset((0, 1)))
                for n in names]

    def make(self, outcomes, clock=None):
        attempts = []

        def move(host, uuid, home, away, every):
            attempts.append(uuid)
            return outcomes.pop(0)
        widened = []

        def widen(host, uuid, every):
            widened.append(uuid)
            return memhome_host.Outcome(memhome_host.Result.MOVED, 'ok')
        home = memhome.MemoryHome(FakeAdapter, clock=clock or Clock(),
                                  move=move, widen=widen)
        return home, attempts, widened

    def feed(self, home, *names):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.passes.memhome.candidates',
            lambda result: self.candidates(*names)))
        home.after_pass(None)

    def test_retry_after_300_s_whatever_the_outcome(self):
        clock = Clock()
        no_room = memhome_host.Outcome(memhome_host.Result.NO_ROOM, 'full')
        moved = memhome_host.Outcome(memhome_host.Result.MOVED, 'ok')
        home, attempts, _ = self.make([no_room, no_room, moved], clock)
        self.feed(home, 'a', 'b')
        self.assertEqual('no-room', home.run_once().result)
        self.assertEqual('no-room', home.run_once().result)
        self.assertIsNone(home.run_once())  # both wait their turn
        clock.now += 299
        self.assertIsNone(home.run_once())
        clock.now += 1
        self.assertEqual('moved', home.run_once().result)
        self.assertEqual(['u-a', 'u-b', 'u-a'], attempts)

    def test_a_guest_no_pass_names_is_dropped(self):
        moved = memhome_host.Outcome(memhome_host.Result.MOVED, 'ok')
        home, attempts, _ = self.make([moved])
        self.feed(home, 'a')
        self.feed(home)
        self.assertIsNone(home.run_once())
        self.assertEqual([], attempts)

    def test_a_nodeset_left_strict_is_widened_first(self):
        stuck = memhome_host.Outcome(memhome_host.Result.TIMEOUT, 'hung',
                                     widened=False)
        home, attempts, widened = self.make([stuck])
        self.feed(home, 'a', 'b')
        home.run_once()
        home.run_once()  # the widening, not b's move
        self.assertEqual((['u-a'], ['u-a']), (attempts, widened))


class TestNeverHoldsUpAPass(MemoryHomeTestCase):

    def test_after_pass_returns_while_a_move_runs(self):
        self.arrive('x', 2, {'0': 100 * MIB, '1': 156 * MIB})
        self.arrive('z', 2, {'0': 156 * MIB, '1': 100 * MIB})
        started, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        def slow_move(*args, **kwargs):
            started.set()
            release.wait(10)
            return memhome_host.Outcome(memhome_host.Result.MOVED, 'ok')
        home = memhome.MemoryHome(FakeAdapter, move=slow_move)
        home.start()
        self.addCleanup(home.stop, 1.0)
        home.after_pass(self.rec.run_pass())
        self.assertTrue(started.wait(5))
        # A pass and its hand-over while the move runs: neither waits.
        t0 = time.monotonic()
        result = self.rec.run_pass()
        home.after_pass(result)
        self.assertIsNone(result.error)
        self.assertLess(time.monotonic() - t0, 2.0)
