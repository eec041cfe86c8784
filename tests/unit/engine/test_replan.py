"""Incremental planning (``replan``): the same plan as the whole host's,
in proportion to what changed.

The properties run passes over random hosts: plan, write the changes
(the guests whose pins changed come back as new ``Guest`` objects, as a
re-read domain does), change a few guests at random, plan again, and
compare with ``policy.make_plan`` of the same guests.
"""

import random

import hypothesis
from hypothesis import strategies as st
import testtools

from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine import replan
from tests.unit import hosts
from tests.unit.policy_fixtures import applied
from tests.unit.policy_fixtures import G
from tests.unit.policy_fixtures import host as named_host
from tests.unit.engine.test_properties import random_host


def written(guests, p):
    """``guests`` once the changes of ``p`` were written: only the guests
    whose pins changed are new objects, as the reconciler reads them."""
    return applied(guests, p, only={c.uuid for c in plan_mod.changes(
        p, guests)})


def a_guest(rnd, host, uuid, facts_only):
    """A random guest; with ``facts_only`` its memory is always placed,
    as on a live host where the memory cgroup tells."""
    vcpus = rnd.randint(1, 8)
    nodes = list(host.nodes)
    kind = rnd.random()
    if kind < 0.75 or (facts_only and kind < 0.9):
        mem = {rnd.choice(nodes): 1024}
    elif kind < 0.9 or facts_only:
        mem = dict.fromkeys(rnd.sample(nodes, min(2, len(nodes))), 512)
    else:
        mem = {}
    pins = {}
    if rnd.random() < 0.2:
        pins = {v: str(rnd.choice(sorted(host.cpus))) for v in range(vcpus)}
    numa = pins and rnd.random() < 0.1
    # Some with an IOThread (pinned with the emulator), drawn from what
    # was drawn already: the random sequences stay the ones they were.
    xml = hosts.domain_xml('g-' + uuid, vcpus, uuid=uuid, pins=pins,
                           numa_cells=bool(numa), nova=rnd.random() < 0.95,
                           iothreads=int(vcpus % 3 == 0))
    return guest_mod.Guest.from_xml(xml, active=rnd.random() < 0.95,
                                    memory_by_node_kib=mem)


def mutate(rnd, host, guests, serial, facts_only):
    """A few random operations: (guests, changed {uuid: Guest}, removed)."""
    guests = list(guests)
    changed, removed = {}, set()
    for _ in range(rnd.choice([1, 1, 1, 2, 3])):
        op = rnd.random()
        if op < 0.4 or not guests:  # boot
            g = a_guest(rnd, host, 'u%04d' % next(serial), facts_only)
            guests.append(g)
            changed[g.uuid] = g
        elif op < 0.6:  # delete
            g = guests.pop(rnd.randrange(len(guests)))
            changed.pop(g.uuid, None)
            removed.add(g.uuid)
        else:  # resize, migrate memory, stop or pin by hand: a new read
            i = rnd.randrange(len(guests))
            old = guests[i]
            new = a_guest(rnd, host, old.uuid, facts_only)
            guests[i] = new
            changed[new.uuid] = new
    return guests, changed, removed


def order(change):
    return change.uuid, change.kind, str(change.index)


def same_plan(test, expected, got):
    test.assertEqual(expected.guests, got.guests)
    for field in ('pool', 'pool_by_node', 'allocation_ratio',
                  'total_vcpus', 'node_vcpus', 'cross_node_vcpus',
                  'emulator_threads'):
        test.assertEqual(getattr(expected, field), getattr(got, field),
                         field)


class TestSameAsTheWholeHost(testtools.TestCase):

    def run_passes(self, host, guests, options, seed, steps, facts_only,
                   confirm_rate=0.9):
        rnd = random.Random(seed)
        serial = iter(range(1000, 10 ** 6))
        planner = replan.Planner()
        changed, removed = None, set()
        for _ in range(steps):
            expected = policy.make_plan(host, guests, options)
            got, scope = planner.plan(host, guests, options, changed,
                                      removed)
            same_plan(self, expected, got)
            needed = plan_mod.changes(expected, guests)
            if scope is not None:
                # Every guest with a pin to write is in the scope, and
                # the diff over the scope alone finds every change.
                self.assertEqual(sorted(needed, key=order), sorted(
                    plan_mod.changes(got, guests, pairs=scope), key=order))
            if rnd.random() < confirm_rate:
                planner.confirm()
                after = written(guests, got)
                changed = {b.uuid: b for a, b in zip(guests, after)
                           if a is not b}
                guests = after
            else:  # the pass failed or was a dry run: nothing written
                changed = {}
            removed = set()
            guests, more, removed = mutate(rnd, host, guests, serial,
                                           facts_only)
            for uuid in removed:
                changed.pop(uuid, None)
            changed.update(more)
        return planner

    @hypothesis.given(random_host(), st.integers(0, 2 ** 32),
                      st.sampled_from([0.5, 1.0, 1.5, 2.0, 4.0, 16.0]),
                      st.booleans(), st.booleans(),
                      st.sampled_from(emuthreads.Setting.values()))
    def test_random_passes(self, host, seed, ratio, reserve, facts_only,
                           emulator_threads):
        rnd = random.Random(seed)
        cpus = sorted(host.cpus)
        reserved = None
        if reserve and len(cpus) > 1:
            reserved = frozenset(rnd.sample(cpus, rnd.randint(1,
                                                              len(cpus) - 1)))
        options = policy.Options(allocation_ratio=ratio,
                                 reserved_cpus=reserved,
                                 set_home_node=rnd.random() < 0.3,
                                 emulator_threads=emulator_threads)
        serial = iter(range(10 ** 6))
        guests = [a_guest(rnd, host, 'i%04d' % next(serial), facts_only)
                  for _ in range(rnd.randint(0, 10))]
        self.run_passes(host, guests, options, seed, 12, facts_only)

    def test_a_long_day_on_a_large_host(self):
        host = named_host('amd-2s-64c-nps4')
        options = policy.Options(allocation_ratio=4.0,
                                 reserved_cpus=frozenset({0, 1}))
        rnd = random.Random(7)
        guests = [a_guest(rnd, host, 'i%04d' % i, True) for i in range(60)]
        planner = self.run_passes(host, guests, options, 7, 150, True,
                                  confirm_rate=1.0)
        # The host filled up and changed layout along the way, yet most
        # passes planned only what changed.
        self.assertLess(planner.whole, 40)

    def test_a_long_day_with_emulator_threads_shared(self):
        # One-to-one guests' emulator and I/O threads on their node's
        # pCPUs no one-to-one vCPU holds: those change whenever the node
        # gains or loses a one-to-one guest, and so must their pins.
        host = named_host('amd-2s-64c-nps4')
        options = policy.Options(allocation_ratio=4.0,
                                 reserved_cpus=frozenset({0, 1}),
                                 emulator_threads=emuthreads.Setting.SHARED)
        rnd = random.Random(11)
        guests = [a_guest(rnd, host, 'i%04d' % i, True) for i in range(12)]
        p = policy.make_plan(host, guests, options)
        self.assertIn(emuthreads.Rule.POOL_FREE,
                      {gp.emulator_rule for gp in p.guests})
        self.run_passes(host, guests, options, 11, 80, True,
                        confirm_rate=1.0)

    def test_a_long_day_on_hosts_with_l3_domains(self):
        # Real-shaped banks (several L3 domains per node) with the host
        # mostly one-to-one: where alignment picks the pCPUs.
        for name in ('genoa-2s-nps1', 'milan-2s-nps4'):
            host = named_host(name)
            self.assertTrue(host.l3_of, name)
            options = policy.Options(allocation_ratio=4.0,
                                     reserved_cpus=frozenset({0, 1}))
            rnd = random.Random(21)
            guests = [a_guest(rnd, host, 'i%04d' % i, True)
                      for i in range(30)]
            p = policy.make_plan(host, guests, options)
            self.assertGreater(sum(gp.mode == plan_mod.DEDICATED
                                   for gp in p.guests), 10, name)
            self.run_passes(host, guests, options, 21, 60, True,
                            confirm_rate=1.0)


class TestScope(testtools.TestCase):
    """What an incremental plan touches."""

    def settled(self, host, guests, options):
        planner = replan.Planner()
        p, _ = planner.plan(host, guests, options)
        planner.confirm()
        return planner, written(guests, p)

    def test_host_range_one_new_guest_only(self):
        host = named_host('amd-2s-64c-nps4')
        options = policy.Options(allocation_ratio=1.0)
        guests = [G('g%03d' % i, 4, i % 8) for i in range(300)]
        planner, guests = self.settled(host, guests, options)
        new = G('new', 2, 3)
        p, scope = planner.plan(host, guests + [new], options,
                                {new.uuid: new})
        self.assertEqual(1, planner.whole)
        self.assertEqual([new.uuid], [gp.uuid for gp, _ in scope])
        self.assertEqual({plan_mod.HOST_RANGE},
                         {gp.mode for gp in p.guests})

    def test_a_change_on_one_node_plans_that_node_only(self):
        host = named_host('amd-2s-64c-nps4')
        options = policy.Options(allocation_ratio=4.0)
        # Nodes 0-3 one-to-one (room), nodes 4-7 node range (shared).
        guests = [G('d%d-%d' % (n, i), 4, n) for n in range(4)
                  for i in range(4)]
        guests += [G('r%d-%d' % (n, i), 8, n) for n in range(4, 8)
                   for i in range(6)]
        planner, guests = self.settled(host, guests, options)
        for name, node in (('one', 2), ('shared', 6)):
            new = G(name, 2, node)
            guests = guests + [new]
            p, scope = planner.plan(host, guests, options, {new.uuid: new})
            planner.confirm()
            homes = {gp.home_node for gp, _ in scope}
            self.assertEqual({node}, homes, name)
            guests = written(guests, p)
        # The one-to-one node was assigned again (its 5 guests), the
        # node-range node planned only its newcomer.
        self.assertEqual(1, len(scope))
        self.assertEqual(1, planner.whole)

    def test_an_unconfirmed_plan_makes_the_next_whole(self):
        host = named_host('small-1node')
        options = policy.Options(allocation_ratio=4.0)
        guests = [G('a', 1, 0)]
        planner, guests = self.settled(host, guests, options)
        new = G('b', 1, 0)
        planner.plan(host, guests + [new], options, {new.uuid: new})
        # Not confirmed (say, a dry run); the caller says nothing changed
        # since, which is true only relative to that plan.
        _, scope = planner.plan(host, guests + [new], options, {})
        self.assertIsNone(scope)
        self.assertEqual(2, planner.whole)

    def test_a_nova_placed_guest_plans_the_whole_host(self):
        host = named_host('small-1node')
        options = policy.Options(allocation_ratio=4.0)
        planner, guests = self.settled(host, [G('a', 1, 0)], options)
        nova = G('pinned', 1, 0, numa_cells=True, pins={0: '3'})
        p, scope = planner.plan(host, guests + [nova], options,
                                {nova.uuid: nova})
        self.assertIsNone(scope)
        self.assertNotIn(3, p.pool)
