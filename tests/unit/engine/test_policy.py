"""The seed's rules, branch by branch, on named hosts.

Each scenario is named <host>_<rule>; it lists the guests and, for each,
the mode and rule expected. Pins are checked by invariants (in the pool,
one-to-one exclusive, on the home node) plus exact values where they
matter.
"""

import testtools

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from tests.unit.policy_fixtures import G, applied, by_name, host, make

D, NR, XR, HR, U = (plan_mod.DEDICATED, plan_mod.NODE_RANGE,
                    plan_mod.CROSS_NODE_RANGE, plan_mod.HOST_RANGE,
                    plan_mod.UNTOUCHED)
S = cpuset.parse

# name: (host, ratio, options, guests, {guest: (mode, rule prefix)})
SCENARIOS = {
    'small_1node_one_to_one': (
        'small-1node', 4.0, {}, [G('a', 2, 0), G('b', 2, 0)],
        {'a': (D, 'rule-2-one-to-one'), 'b': (D, 'rule-2-one-to-one')}),
    'small_1node_node_range': (
        'small-1node', 4.0, {}, [G('a', 2, 0), G('b', 2, 0), G('c', 2, 0)],
        {'a': (NR, 'rule-2-node-range'), 'c': (NR, 'rule-2-node-range')}),
    'small_1node_ratio_boundary_is_node_range': (
        'small-1node', 1.5, {}, [G('a', 3, 0), G('b', 3, 0)],
        {'a': (NR, 'rule-2-node-range')}),
    'small_1node_rule1_host_oversubscribed': (
        'small-1node', 1.5, {}, [G('a', 4, 0), G('b', 3, 0)],
        {'a': (HR, 'rule-1'), 'b': (HR, 'rule-1')}),
    'this_machine_one_to_one': (
        'this-machine', 1.0, {}, [G('a', 1, 0), G('b', 1, 0)],
        {'a': (D, 'rule-2-one-to-one'), 'b': (D, 'rule-2-one-to-one')}),
    'this_machine_reserved_node_range': (
        'this-machine', 4.0, {'reserved_cpus': S('0')},
        [G('a', 1, 0), G('b', 1, 0)],
        {'a': (NR, 'rule-2-node-range'), 'b': (NR, 'rule-2-node-range')}),
    'intel_rule2_node_oversubscribed_makes_host_range': (
        'intel-2s-28c-ht', 1.0, {}, [G('big', 40, 0), G('b', 20, 0),
                                     G('c', 2, 1)],
        {'big': (HR, 'rule-2'), 'c': (HR, 'rule-2')}),
    'intel_mixed_nodes_and_cross_node': (
        'intel-2s-28c-ht', 4.0, {},
        [G('a', 8, 0), G('b', 30, 1), G('c', 30, 1), G('x', 4, [0, 1])],
        {'a': (D, 'rule-2-one-to-one'), 'b': (NR, 'rule-2-node-range'),
         'x': (XR, 'rule-3')}),
    'intel_rule3_cross_node_oversubscribed': (
        'intel-2s-28c-ht', 2.0, {},
        [G('a', 56, 0), G('b', 56, 1), G('x', 2, [0, 1])],
        {'a': (HR, 'rule-3'), 'x': (HR, 'rule-3')}),
    'amd_nps4_eight_nodes_one_to_one': (
        'amd-2s-64c-nps4', 2.0, {},
        [G('n%d' % n, 16, n) for n in range(8)],
        {'n%d' % n: (D, 'rule-2-one-to-one') for n in range(8)}),
    'arm_80c_host_range_at_ratio_1': (
        'arm-1s-80c', 1.0, {}, [G('a', 60, 0), G('b', 30, 0)],
        {'a': (HR, 'rule-1')}),
    'offline_cpus_one_to_one': (
        'offline-cpus', 1.0, {}, [G('a', 6, 0), G('b', 7, 1)],
        {'a': (D, 'rule-2-one-to-one'), 'b': (D, 'rule-2-one-to-one')}),
    'uneven_nodes_small_node_range': (
        'uneven-nodes', 2.0, {}, [G('a', 8, 0), G('b', 6, 1)],
        {'a': (D, 'rule-2-one-to-one'), 'b': (NR, 'rule-2-node-range')}),
    'memory_only_node_guest_is_cross_node': (
        'memory-only-node', 4.0, {}, [G('a', 2, 0), G('far', 2, 2)],
        {'a': (D, 'rule-2-one-to-one'), 'far': (XR, 'rule-3')}),
    'nova_placed_untouched_and_cpus_leave_pool': (
        'small-1node', 4.0, {},
        [G('pinned', 2, 0, numa_cells=True, pins={0: '0', 1: '1'}),
         G('a', 2, 0)],
        {'pinned': (U, 'nova-placed'), 'a': (D, 'rule-2-one-to-one')}),
    'foreign_ignored': (
        'small-1node', 4.0, {'foreign_domains': 'ignore'},
        [G('virsh', 2, 0, nova=False), G('a', 2, 0)],
        {'virsh': (U, 'foreign'), 'a': (D, 'rule-2-one-to-one')}),
    'foreign_managed': (
        'small-1node', 4.0, {},
        [G('virsh', 2, 0, nova=False), G('a', 2, 0)],
        {'virsh': (D, 'rule-2-one-to-one')}),
    'stopped_guest_holds_nothing': (
        'small-1node', 1.0, {}, [G('off', 4, 0, active=False),
                                 G('a', 4, 0)],
        {'off': (U, 'not-running'), 'a': (D, 'rule-2-one-to-one')}),
    'empty_pool_touches_nothing': (
        'small-1node', 4.0, {'reserved_cpus': S('0-3')}, [G('a', 1, 0)],
        {'a': (U, 'empty-pool')}),
    'guest_too_big_for_any_node_is_cross_node': (
        'intel-2s-28c-ht', 1.0, {}, [G('huge', 80)],
        {'huge': (XR, 'rule-3')}),
    'shared_and_dedicated_sets_shape_the_pool': (
        'small-1node', 4.0, {'shared_cpus': S('1-3'),
                             'dedicated_cpus': S('3')},
        [G('a', 2, 0)], {'a': (D, 'rule-2-one-to-one')}),
}


class TestScenarios(testtools.TestCase):

    def test_scenarios(self):
        for name, (host_name, ratio, options, guests, expect) in \
                SCENARIOS.items():
            h, p = make(host_name, guests, ratio, **options)
            plans = by_name(p)
            for gname, (mode, rule) in expect.items():
                gp = plans[gname]
                self.assertEqual(mode, gp.mode, '%s: %s' % (name, gname))
                self.assertTrue(gp.rule.startswith(rule),
                                '%s: %s rule %s' % (name, gname, gp.rule))
                self.assertTrue(gp.reason)
            check_invariants(self, h, guests, p, name)


def check_invariants(test, h, guests, p, name='', dedicated_cpus=None):
    """What holds for every plan (also used by the property tests);
    ``dedicated_cpus``: nova's ``cpu_dedicated_set`` of the plan."""
    owners = {}
    nova_cpus = set()
    for g in guests:
        if g.active and g.nova_placed:
            nova_cpus |= g.exclusive_cpus(dedicated_cpus)
    test.assertFalse(p.pool & nova_cpus, name)
    test.assertTrue(p.pool <= h.cpus, name)
    for gp in p.guests:
        if gp.mode == U:
            test.assertEqual({}, gp.vcpu_pins, name)
            continue
        for vcpu, cpus in gp.vcpu_pins.items():
            test.assertTrue(cpus, name)
            test.assertTrue(cpus <= p.pool, '%s: %s vCPU %d' % (
                name, gp.name, vcpu))
        test.assertTrue(gp.emulator_pin <= p.pool, name)
        if gp.mode == D:
            nodes = {h.node_of[c] for cpus in gp.vcpu_pins.values()
                     for c in cpus}
            test.assertEqual({gp.home_node}, nodes, name)
            for cpus in gp.vcpu_pins.values():
                test.assertEqual(1, len(cpus), name)
                cpu = min(cpus)
                test.assertNotIn(cpu, owners, '%s: pCPU %d shared by %s '
                                 'and %s' % (name, cpu, owners.get(cpu),
                                             gp.name))
                owners[cpu] = gp.name
            test.assertEqual(frozenset().union(*gp.vcpu_pins.values()),
                             gp.emulator_pin, name)
    for gp in p.guests:
        if gp.mode in plan_mod.SHARED:
            # Every vCPU on the emulator's set (plan.to_json relies on it).
            test.assertEqual({gp.emulator_pin}, set(gp.vcpu_pins.values()),
                             name)
        if gp.mode in (NR, XR, HR):
            shared = set().union(*gp.vcpu_pins.values())
            if gp.mode == XR:
                test.assertFalse(shared & owners.keys(), name)


class TestExactPins(testtools.TestCase):

    def test_whole_cores_first_on_intel(self):
        _, p = make('intel-2s-28c-ht', [G('a', 4, 0)], reserved_cpus=S('0'))
        gp = by_name(p)['a']
        # Core 0 is half reserved: the guest gets cores 1 and 2 whole.
        self.assertEqual({0: S('1'), 1: S('57'), 2: S('2'), 3: S('58')},
                         gp.vcpu_pins)
        self.assertEqual(S('1-2,57-58'), gp.emulator_pin)

    def test_half_cores_filled_before_breaking_whole_ones(self):
        guests = [G('a', 3, 0, uuid='1'), G('b', 1, 0, uuid='2')]
        _, p = make('intel-2s-28c-ht', guests)
        a, b = by_name(p)['a'], by_name(p)['b']
        self.assertEqual([S('0'), S('56'), S('1')], list(a.vcpu_pins.values()))
        self.assertEqual(S('57'), b.vcpu_pins[0])

    def test_smt4_core_per_guest(self):
        _, p = make('smt4', [G('a', 4, 0, uuid='1'), G('b', 2, 0, uuid='2'),
                             G('c', 2, 0, uuid='3')])
        plans = by_name(p)
        self.assertEqual(S('0-3'), plans['a'].emulator_pin)
        # b and c share one core rather than breaking two.
        self.assertEqual(S('4-7'), plans['b'].emulator_pin |
                         plans['c'].emulator_pin)

    def test_adjacent_siblings_pair_up(self):
        _, p = make('adjacent-siblings', [G('a', 2, 1)])
        self.assertEqual(S('8-9'), by_name(p)['a'].emulator_pin)

    def test_node_range_is_node_pool(self):
        _, p = make('intel-2s-28c-ht', [G('b', 60, 1)], ratio=2.0,
                    reserved_cpus=S('28'))
        gp = by_name(p)['b']
        self.assertEqual(S('29-55,84-111'), gp.vcpu_pins[0])
        self.assertEqual(1, gp.home_node)

    def test_cross_node_range_is_pool_without_one_to_one(self):
        _, p = make('small-1node', [G('a', 1, 0, uuid='1'),
                                    G('x', 1, [0])])
        self.assertEqual(D, by_name(p)['x'].mode)
        _, p = make('intel-2s-28c-ht', [G('a', 2, 0), G('x', 2, [0, 1])])
        x, a = by_name(p)['x'], by_name(p)['a']
        self.assertEqual(p.pool - a.emulator_pin, x.emulator_pin)

    def test_iothreads_follow_emulator(self):
        _, p = make('small-1node', [G('a', 2, 0, iothreads=1)])
        gp = by_name(p)['a']
        self.assertEqual({1: gp.emulator_pin}, gp.iothread_pins)

    def test_nova_shared_range_guest_keeps_its_cpus_in_pool(self):
        guests = [G('shared', 2, 0, numa_cells=True,
                    pins={0: '0-3', 1: '0-3'}), G('a', 2, 0)]
        _, p = make('small-1node', guests)
        self.assertEqual(S('0-3'), p.pool)


class TestHomeNode(testtools.TestCase):

    def test_memory_below_threshold_is_cross_node(self):
        g = G('x', 2, None)
        g = g._replace(memory_by_node_kib={0: 85, 1: 15})
        _, p = make('intel-2s-28c-ht', [g])
        self.assertEqual(XR, p.guests[0].mode)
        _, p = make('intel-2s-28c-ht', [g], home_node_min_fraction=0.8)
        self.assertEqual((D, 0), (p.guests[0].mode, p.guests[0].home_node))

    def test_numatune_gives_home(self):
        _, p = make('intel-2s-28c-ht', [G('a', 2, numatune='1')])
        self.assertEqual((1, 'numatune'), (p.guests[0].home_node,
                                           p.guests[0].home_source))

    def test_chosen_home_is_least_loaded(self):
        guests = [G('a', 20, 0), G('new', 4)]
        _, p = make('intel-2s-28c-ht', guests)
        self.assertEqual((1, 'chosen'), (by_name(p)['new'].home_node,
                                         by_name(p)['new'].home_source))
        self.assertIsNone(by_name(p)['new'].numa_nodeset)

    def test_chosen_home_sets_memory_policy_when_asked(self):
        guests = [G('a', 20, 0), G('new', 4)]
        _, p = make('intel-2s-28c-ht', guests, set_home_node=True)
        self.assertEqual(S('1'), by_name(p)['new'].numa_nodeset)
        _, again = make('intel-2s-28c-ht', applied(guests, p),
                        set_home_node=True)
        self.assertEqual((1, 'numatune'), (by_name(again)['new'].home_node,
                                           by_name(again)['new'].home_source))
        self.assertIsNone(by_name(again)['new'].numa_nodeset)

    def test_chosen_home_sticks_through_pins(self):
        guests = [G('a', 20, 0), G('new', 4)]
        _, p = make('intel-2s-28c-ht', guests)
        guests = applied(guests, p)
        guests.append(G('more', 30, 1))
        _, again = make('intel-2s-28c-ht', guests)
        self.assertEqual((1, 'pins'), (by_name(again)['new'].home_node,
                                       by_name(again)['new'].home_source))
        self.assertEqual(by_name(p)['new'].vcpu_pins,
                         by_name(again)['new'].vcpu_pins)


class TestStability(testtools.TestCase):

    def test_one_to_one_guest_keeps_valid_pins(self):
        g = G('a', 2, 0, pins={0: '3', 1: '2'})
        _, p = make('small-1node', [g, G('b', 1, 0)])
        self.assertEqual({0: S('3'), 1: S('2')}, by_name(p)['a'].vcpu_pins)

    def test_grown_guest_keeps_old_vcpus(self):
        g = G('a', 4, 0, pins={0: '5', 1: '61'})
        _, p = make('intel-2s-28c-ht', [g])
        pins = by_name(p)['a'].vcpu_pins
        self.assertEqual((S('5'), S('61')), (pins[0], pins[1]))

    def test_conflicting_pins_first_uuid_wins(self):
        guests = [G('b', 1, 0, uuid='2', pins={0: '1'}),
                  G('a', 1, 0, uuid='1', pins={0: '1'})]
        _, p = make('small-1node', guests)
        self.assertEqual(S('1'), by_name(p)['a'].vcpu_pins[0])
        self.assertNotEqual(S('1'), by_name(p)['b'].vcpu_pins[0])

    def test_second_plan_has_no_changes(self):
        for name, (host_name, ratio, options, guests, _) in \
                SCENARIOS.items():
            _, p = make(host_name, guests, ratio, **options)
            after = applied(guests, p)
            _, again = make(host_name, after, ratio, **options)
            self.assertEqual([], plan_mod.changes(again, after), name)

    def test_changes_count_only_differences(self):
        guests = [G('a', 2, 0)]
        _, p = make('small-1node', guests)
        self.assertEqual(3, len(plan_mod.changes(p, guests)))
        after = applied(guests, p)
        after.append(G('b', 1, 0))
        _, again = make('small-1node', after)
        changed = {c.name for c in plan_mod.changes(again, after)}
        self.assertEqual({'b'}, changed)


class TestValidation(testtools.TestCase):

    def test_bad_ratio(self):
        for ratio in (0, -1, float('nan'), float('inf'), 'x', None, True):
            self.assertRaises(policy.PolicyError, make, 'small-1node', [],
                              ratio)

    def test_cpus_outside_host(self):
        exc = self.assertRaises(policy.PolicyError, make, 'small-1node', [],
                                reserved_cpus=S('7'))
        self.assertIn('reserved_cpus', str(exc))

    def test_deterministic(self):
        guests = [G('g%d' % i, 1 + i % 3, i % 2) for i in range(20)]
        _, p1 = make('intel-2s-28c-ht', guests)
        _, p2 = make('intel-2s-28c-ht', list(reversed(guests)))
        self.assertEqual(sorted(p1.guests, key=lambda g: g.uuid),
                         sorted(p2.guests, key=lambda g: g.uuid))


class TestRelease(testtools.TestCase):
    """``release`` puts managed guests back on what nova gave them, never
    wider (issue 34, R1): a live pin stays in ``dumpxml --migratable``."""

    def test_back_on_novas_cpuset_or_every_cpu(self):
        h = host('small-1node')
        shared = G('shared', 2, 0, pins={0: '3', 1: '2'}, emulator='2-3')
        shared = shared._replace(default_cpuset=S('0-1'))
        plain = G('plain', 1, 0, pins={0: '3'})
        nova = G('nova', 1, 0, numa_cells=True, pins={0: '2'})
        p = policy.release_plan(h, [shared, plain, nova],
                                policy.Options(allocation_ratio=4.0))
        got = {gp.name: (gp.mode, gp.vcpu_pins, gp.emulator_pin)
               for gp in p.guests}
        self.assertEqual(
            {'shared': (plan_mod.RELEASED, {0: S('0-1'), 1: S('0-1')},
                        S('0-1')),
             'plain': (plan_mod.RELEASED, {0: S('0-3')}, S('0-3')),
             'nova': (U, {}, None)}, got)
