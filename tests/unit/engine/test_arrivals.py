"""Arrived guests (issue 61): a guest migrated in or restored, whose
memory qemu's incoming copy split over both nodes, gets a home and is
planned as a guest born there, while it fits one node.

The host is the project's 2-socket VM as the policy sees it: 2 nodes of
4 CPUs (2 cores x 2 threads), 1 GiB each. Each row of ``scenarios``
lists the guests and, for the guest ``x``, the (mode, home node, home
source) expected; the other guests are there for the room they take.
"""

import testtools

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine import replan
from nova_pinning_hooks.engine import snapshot as snapshot_mod
from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.engine import topology
from tests.unit import hosts
from tests.unit.policy_fixtures import G, applied, by_name

MIB = 1024  # KiB
NODE_KIB = 1024 * MIB
VM_2S = hosts.capabilities([[[0, 1], [2, 3]], [[4, 5], [6, 7]]],
                           memory_kib=NODE_KIB)
D, NR, XR = (plan_mod.DEDICATED, plan_mod.NODE_RANGE,
             plan_mod.CROSS_NODE_RANGE)
# ``plan.HomeSource`` values, as text: the plan's JSON carries them so.
ARRIVED, MEMORY = 'arrived', 'memory'


def host():
    return topology.HostTopology.from_capabilities(VM_2S)


def A(name, vcpus, split, arrived=True, memory_mib=256, **xml):
    """A guest of ``memory_mib`` whose memory lies per ``split``
    ({node: fraction}), arrived or not."""
    kib = memory_mib * MIB
    g = G(name, vcpus, None, memory_kib=kib, **xml)
    return g._replace(
        memory_by_node_kib={n: int(kib * f) for n, f in split.items() if f},
        arrived=arrived)


def homed(name, vcpus, node, memory_mib=256):
    """A guest born on ``node`` (all its memory there)."""
    return A(name, vcpus, {node: 1.0}, arrived=False, memory_mib=memory_mib)


def scenarios():
    """name: (ratio, options, guests, (mode, home node, source) of
    'x'); built when a test runs."""
    return {
        'split_most_on_node_0_alone': (
            4.0, {}, [A('x', 2, {0: 0.6, 1: 0.4})], (D, 0, ARRIVED)),
        'split_most_on_node_1_alone': (
            4.0, {}, [A('x', 2, {0: 0.4, 1: 0.6})], (D, 1, ARRIVED)),
        'split_evenly_the_lower_node': (
            4.0, {}, [A('x', 2, {0: 0.5, 1: 0.5})], (D, 0, ARRIVED)),
        'not_arrived_split_stays_cross_node': (
            4.0, {}, [A('x', 2, {0: 0.6, 1: 0.4}, arrived=False)],
            (XR, None, MEMORY)),
        'arrived_with_memory_home_already_is_a_memory_home': (
            4.0, {}, [A('x', 2, {0: 0.95, 1: 0.05})], (D, 0, MEMORY)),
        'one_to_one_beside_a_guest_born_there': (
            4.0, {}, [homed('a', 2, 0), A('x', 2, {0: 0.7, 1: 0.3})],
            (D, 0, ARRIVED)),
        'node_range_when_its_node_is_shared_but_within_ratio': (
            4.0, {}, [homed('a', 4, 0), homed('b', 4, 1),
                      A('x', 2, {0: 0.7, 1: 0.3})], (NR, 0, ARRIVED)),
        'most_memory_node_full_by_ratio_chosen_elsewhere': (
            1.0, {}, [homed('a', 4, 0), A('x', 2, {0: 0.7, 1: 0.3})],
            (D, 1, ARRIVED)),
        'most_memory_node_without_memory_room_chosen_elsewhere': (
            4.0, {}, [homed('a', 1, 0, memory_mib=900),
                      A('x', 2, {0: 0.7, 1: 0.3})], (D, 1, ARRIVED)),
        'most_memory_node_without_pool_cpus_chosen_elsewhere': (
            4.0, {'reserved_cpus': cpuset.parse('0-3')},
            [A('x', 2, {0: 0.7, 1: 0.3})], (D, 1, ARRIVED)),
        'fits_no_node_by_vcpus_stays_cross_node': (
            1.0, {}, [A('x', 6, {0: 0.6, 1: 0.4})], (XR, None, MEMORY)),
        'fits_no_node_by_memory_stays_cross_node': (
            4.0, {}, [A('x', 2, {0: 0.6, 1: 0.4}, memory_mib=1536)],
            (XR, None, MEMORY)),
        'no_node_has_room_left_stays_cross_node': (
            1.0, {}, [homed('a', 4, 0), homed('b', 4, 1),
                      A('x', 2, {0: 0.6, 1: 0.4})], (None, None, MEMORY)),
    }



def plan(guests, ratio=4.0, **options):
    return policy.make_plan(host(), guests, policy.Options(
        allocation_ratio=ratio, **options))


class TestArrivalHomes(testtools.TestCase):

    def test_scenarios(self):
        for name, (ratio, options, guests, want) in scenarios().items():
            gp = by_name(plan(guests, ratio, **options))['x']
            mode, home, source = want
            got = (gp.mode if mode is not None else None, gp.home_node,
                   gp.home_source)
            self.assertEqual(want, got, name)
            if gp.mode == D:  # one-to-one on its home node's CPUs
                node_cpus = host().nodes[gp.home_node].cpus
                pins = frozenset().union(*gp.vcpu_pins.values())
                self.assertLessEqual(pins, node_cpus, name)
                self.assertEqual(len(gp.vcpu_pins), len(pins), name)

    def test_no_memory_policy_planned_for_an_arrival(self):
        # The pass never writes a strict nodeset for an arrival: moving
        # its memory is ``passes.memhome``'s, bounded, and widened after.
        gp = by_name(plan([A('x', 2, {0: 0.6, 1: 0.4})],
                          set_home_node=True))['x']
        self.assertEqual((D, None), (gp.mode, gp.numa_nodeset))

    def test_stable_while_its_memory_moves_home(self):
        guests = [homed('a', 2, 1), A('x', 2, {0: 0.6, 1: 0.4})]
        first = plan(guests)
        self.assertEqual(0, by_name(first)['x'].home_node)
        guests = applied(guests, first)
        self.assertEqual([], plan_mod.changes(plan(guests), guests))
        # Half moved: the memory is still split, now mostly on its home.
        moving = [g if g.name != 'x' else g._replace(
            memory_by_node_kib={0: 200 * MIB, 1: 56 * MIB})
            for g in guests]
        self.assertEqual([], plan_mod.changes(plan(moving), moving))
        # Home: a memory home, the same pins.
        home = [g if g.name != 'x' else g._replace(
            memory_by_node_kib={0: 256 * MIB}) for g in guests]
        again = by_name(plan(home))['x']
        self.assertEqual((D, 0, MEMORY), (again.mode, again.home_node,
                                          again.home_source))
        self.assertEqual([], plan_mod.changes(plan(home), home))

    def test_chosen_home_kept_through_its_pins(self):
        # Most of its memory on a full node: the home chosen on the other
        # node stays there as the copy's split shifts either way.
        guests = [homed('a', 4, 0), A('x', 2, {0: 0.7, 1: 0.3})]
        first = plan(guests, 1.0)
        self.assertEqual(1, by_name(first)['x'].home_node)
        guests = applied(guests, first)
        self.assertEqual([], plan_mod.changes(plan(guests, 1.0), guests))

    def test_replan_equals_the_whole_host(self):
        planner = replan.Planner()
        options = policy.Options(allocation_ratio=4.0)
        guests = [homed('a', 2, 1)]
        planner.plan(host(), guests, options, None, set())
        planner.confirm()
        x = A('x', 2, {0: 0.6, 1: 0.4})
        guests = guests + [x]
        got, _ = planner.plan(host(), guests, options, {x.uuid: x}, set())
        want = policy.make_plan(host(), guests, options)
        self.assertEqual(want.guests, got.guests)
        self.assertEqual(ARRIVED, by_name(got)['x'].home_source)


class TestSnapshot(testtools.TestCase):

    def domain(self, **extra):
        entry = {'xml': hosts.domain_xml('x', 2, memory_kib=256 * MIB),
                 'memory_by_node_kib': {'0': 150 * MIB, '1': 106 * MIB}}
        entry.update(extra)
        return entry

    def test_arrived_read_from_a_snapshot(self):
        snap = snapshot_mod.make(VM_2S, [self.domain(arrived=True)], 4.0)
        self.assertTrue(snapshot_mod.load(snap).guests[0].arrived)
        snap = snapshot_mod.make(VM_2S, [self.domain()], 4.0)
        self.assertFalse(snapshot_mod.load(snap).guests[0].arrived)

    def test_arrived_must_be_a_bool(self):
        snap = snapshot_mod.make(VM_2S, [self.domain(arrived='yes')], 4.0)
        self.assertRaises(snapshot_mod.SnapshotError, snapshot_mod.load,
                          snap)


class TestSummary(testtools.TestCase):
    """The scheduler's view counts an arrival where the next pass binds
    it: one-to-one on its home node, not in the cross-node vCPUs."""

    def test_arrival_counted_on_its_home(self):
        guests = [A('x', 2, {0: 0.6, 1: 0.4})]
        options = policy.Options(allocation_ratio=4.0)
        h = host()
        p = policy.make_plan(h, guests, options)
        s = summary_mod.of_plan(h, guests, p, options, 0)
        self.assertEqual(0, s.cross)
        self.assertEqual((2, 256 * MIB), (s.nodes[0].vcpus,
                                          s.nodes[0].homed_kib))
        self.assertEqual(2, s.one_to_one)
        self.assertEqual(D, s.modes()[0])
        # A 4-vCPU guest next: one-to-one on the free node, nobody loses.
        f = summary_mod.forecast(s, 4, 256 * MIB)
        self.assertEqual((D, 1, 0), (f.mode, f.home, f.lost))
        entry = summary_mod.entries(guests, p)[guests[0].uuid]
        self.assertEqual((2, 0, 256 * MIB), tuple(entry))
