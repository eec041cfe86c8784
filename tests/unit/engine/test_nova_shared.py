"""Guests nova placed itself without dedicating CPUs to them.

A shared-policy guest with an instance NUMA topology (a NUMA flavor, or
a member's image with ``hw_numa_nodes=1``) is left to nova, but nova
pins it over the shared CPUs: it is load on them (issue 34, R2). Each
row: the host, ratio, options and guests; the pool the plan must have;
and, per guest, its mode, rule and a word its reason must hold.
"""

import testtools

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine import replan
from tests.unit.engine.test_policy import check_invariants
from tests.unit.policy_fixtures import G, applied, by_name, host, make

D, NR, HR, U = (plan_mod.DEDICATED, plan_mod.NODE_RANGE,
                plan_mod.HOST_RANGE, plan_mod.UNTOUCHED)
S = cpuset.parse


def member(name, vcpus, pins, node=0):
    """A member's guest from an ``hw_numa_nodes=1`` image: nova's cell
    and nova's pins, shared policy."""
    return G(name, vcpus, node, numa_cells=True,
             pins=dict.fromkeys(range(vcpus), pins))


# name: (host, ratio, options, guests, pool, {guest: (mode, rule, word)})
ROWS = {
    # (a) no CPU sets: nova's 2-vCPU guest floats over CPUs 0-1; the two
    # managed guests were "one-to-one" on CPU 0 and CPU 1 beside it.
    'a_no_cpu_sets_member_floats_over_the_node': (
        'this-machine', 16.0, {},
        [member('member', 2, '0-1'), G('a', 1, 0), G('b', 1, 0)],
        '0-1',
        {'member': (U, 'nova-placed', 'nova'),
         'a': (NR, 'rule-2-node-range', 'nova placed'),
         'b': (NR, 'rule-2-node-range', 'nova placed')}),
    # Room for one pCPU each even with nova's vCPU counted: still no
    # one-to-one on a node nova's vCPU floats over.
    'a_room_left_but_every_cpu_shared_with_nova': (
        'small-1node', 16.0, {},
        [member('member', 1, '0-3'), G('a', 1, 0), G('b', 1, 0)],
        '0-3',
        {'a': (NR, 'rule-2-node-range', 'nova placed'),
         'b': (NR, 'rule-2-node-range', 'nova placed')}),
    # nova's vCPUs count toward the ratio: 4 vCPUs on 2 pCPUs at 1.
    'a_member_counts_toward_oversubscription': (
        'this-machine', 1.0, {},
        [member('member', 2, '0-1'), G('a', 1, 0), G('b', 1, 0)],
        '0-1',
        {'a': (HR, 'rule-1-host-range', 'oversubscribed'),
         'b': (HR, 'rule-1-host-range', 'oversubscribed')}),
    # (b) a one-CPU cpu_shared_set: nova's <vcpupin cpuset='0'> is a
    # shared pin, not a dedicated pCPU; the pool stays CPU 0.
    'b_one_cpu_shared_set_keeps_its_pool': (
        'this-machine', 16.0, {'shared_cpus': S('0'),
                               'dedicated_cpus': S('1')},
        [member('member', 1, '0'), G('a', 1, 0), G('b', 1, 0)],
        '0',
        {'member': (U, 'nova-placed', 'nova'),
         'a': (NR, 'rule-2-node-range', 'nova placed'),
         'b': (NR, 'rule-2-node-range', 'nova placed')}),
    # nova's dedicated guest beside it: its CPU of cpu_dedicated_set is
    # out (as it always was), the member's shared CPU stays in.
    'b_dedicated_guest_and_member': (
        'small-1node', 16.0, {'shared_cpus': S('0-1'),
                              'dedicated_cpus': S('2-3')},
        [G('ded', 1, 0, numa_cells=True, pins={0: '2'}),
         member('member', 1, '0'), G('a', 1, 0)],
        '0-1',
        {'ded': (U, 'nova-placed', 'nova'),
         'a': (NR, 'rule-2-node-range', 'nova placed')}),
    # A mixed-policy guest: its dedicated vCPU's CPU is out, its shared
    # vCPU floats over node 0's pool; node 1 keeps one-to-one.
    'b_mixed_policy_guest': (
        'intel-2s-28c-ht', 4.0, {'dedicated_cpus': S('27,83')},
        [G('mixed', 2, 0, numa_cells=True,
           pins={0: '27', 1: '0-26,56-82'}),
         G('a', 2, 0), G('c', 2, 1)],
        '0-26,28-82,84-111',
        {'mixed': (U, 'nova-placed', 'nova'),
         'a': (NR, 'rule-2-node-range', 'nova placed'),
         'c': (D, 'rule-2-one-to-one', 'room')}),
    # Unchanged: with no cpu_dedicated_set, a one-CPU nova pin is taken
    # for a dedicated one (the legacy vcpu_pin_set host), as before.
    'legacy_one_cpu_pins_still_leave_the_pool': (
        'small-1node', 4.0, {},
        [G('pinned', 2, 0, numa_cells=True, pins={0: '0', 1: '1'}),
         G('a', 2, 0)],
        '2-3',
        {'a': (D, 'rule-2-one-to-one', 'room')}),
}


class TestNovaSharedGuests(testtools.TestCase):

    def test_rows(self):
        wrong = []  # every row's every guest, not the first miss only
        for name, (host_name, ratio, options, guests, pool, expect) in \
                ROWS.items():
            h, p = make(host_name, guests, ratio, **options)
            if S(pool) != p.pool:
                wrong.append('%s: pool %s' % (name, cpuset.format(p.pool)))
            plans = by_name(p)
            for gname, (mode, rule, word) in expect.items():
                gp = plans[gname]
                if (mode, rule) != (gp.mode, gp.rule) or \
                        word not in gp.reason:
                    wrong.append('%s: %s %s %s (%s)' % (
                        name, gname, gp.mode, gp.rule, gp.reason))
        self.assertEqual([], wrong)
        for name, (host_name, ratio, options, guests, _, _) in \
                ROWS.items():
            h, p = make(host_name, guests, ratio, **options)
            check_invariants(self, h, guests, p, name,
                             options.get('dedicated_cpus'))
            # Stable: applied, the same plan makes no change.
            after = applied(guests, p)
            _, again = make(host_name, after, ratio, **options)
            self.assertEqual([], plan_mod.changes(again, after), name)

    def test_no_one_to_one_pcpu_carries_a_nova_vcpu(self):
        for name, (host_name, ratio, options, guests, _, _) in \
                ROWS.items():
            _, p = make(host_name, guests, ratio, **options)
            dedicated = options.get('dedicated_cpus')
            floated = frozenset().union(*(
                pin for g in guests if g.nova_placed
                for pin in g.vcpu_pins.values()
                if len(pin) > 1 or (dedicated is not None and
                                    not pin <= dedicated)))
            for gp in p.guests:
                if gp.mode == D:
                    held = frozenset().union(*gp.vcpu_pins.values())
                    self.assertFalse(held & floated, '%s: %s on %s' % (
                        name, gp.name, sorted(held & floated)))

    def test_member_counts_in_the_totals(self):
        _, p = make('this-machine', [member('member', 2, '0-1'),
                                     G('a', 1, 0)], 16.0)
        self.assertEqual((3, {0: 3}), (p.total_vcpus, p.node_vcpus))

    def test_incremental_plan_is_the_whole_hosts(self):
        # A managed guest boots beside a member's guest: replan brings
        # the last plan up to date, and it equals the whole host's.
        h = host('small-1node')
        options = policy.Options(allocation_ratio=16.0,
                                 shared_cpus=S('0-1'),
                                 dedicated_cpus=S('2-3'))
        guests = [member('member', 1, '0'), G('a', 1, 0)]
        planner = replan.Planner()
        p, _ = planner.plan(h, guests, options)
        planner.confirm()
        guests = applied(guests, p)
        new = G('b', 1, 0)
        p, scope = planner.plan(h, guests + [new], options,
                                {new.uuid: new})
        self.assertIsNotNone(scope)
        self.assertEqual(policy.make_plan(h, guests + [new], options)
                         .guests, p.guests)
        self.assertEqual(NR, by_name(p)['b'].mode)
