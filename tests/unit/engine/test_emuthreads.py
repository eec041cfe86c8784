"""Where one-to-one guests' emulator and I/O threads run
(``[nova_pinning] emulator_threads``): the rule (``emuthreads``) and the
plans it gives (their output: tests/unit/observe/test_emuthreads.py;
passes through the fake libvirt: tests/unit/cmd/test_emuthreads.py)."""

import random

import testtools

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from tests.unit import hosts
from tests.unit.policy_fixtures import applied
from tests.unit.policy_fixtures import G
from tests.unit.policy_fixtures import make



def S(text):  # noqa: N802
    return cpuset.parse(text) if text else frozenset()


GUEST, SHARED = emuthreads.Setting.GUEST, emuthreads.Setting.SHARED

# setting, one-to-one, vCPUs' pCPUs, node, node pool, held -> cpus, rule
PLACE_CASES = [
    ('guest one-to-one', GUEST, True, '2', 0, '0-3', '1-2', '2',
     emuthreads.Rule.WITH_VCPUS),
    ('guest range', GUEST, False, '0-3', None, '', '', '0-3',
     emuthreads.Rule.WITH_VCPUS),
    ('shared range keeps its range', SHARED, False, '0-3', None, '', '',
     '0-3', emuthreads.Rule.WITH_VCPUS),
    ('shared one-to-one, free pCPUs', SHARED, True, '2', 0, '0-3', '1-2',
     '0,3', emuthreads.Rule.POOL_FREE),
    ('shared, node 1', SHARED, True, '8-9', 1, '8-15', '8-13', '14-15',
     emuthreads.Rule.POOL_FREE),
    ('shared, every pCPU held: node pool', SHARED, True, '1', 0, '0-1',
     '0-1', '0-1', emuthreads.Rule.FALLBACK),
]


class TestPlace(testtools.TestCase):

    def test_cases(self):
        for (name, setting, one_to_one, vcpus, node, pool, held, cpus,
             rule) in PLACE_CASES:
            got = emuthreads.place(setting, one_to_one, S(vcpus), node,
                                   S(pool), S(held))
            self.assertEqual((S(cpus), rule), (got.cpus, got.rule), name)
            if node is not None and rule != emuthreads.Rule.WITH_VCPUS:
                self.assertIn('node %d' % node, got.reason, name)

    def test_with_vcpus_is_the_same_object(self):
        # Range guests share one pin set: ``plan.changes`` compares
        # shared objects once.
        cpus = S('0-3')
        for setting in emuthreads.Setting.values():
            self.assertIs(cpus, emuthreads.place(setting, False, cpus).cpus)

    def test_unknown_setting(self):
        self.assertRaises(ValueError, emuthreads.place, 'isolate', True,
                          S('1'), 0, S('0-1'), S('1'))

    def test_policy_refuses_an_unknown_setting(self):
        self.assertRaises(policy.PolicyError, make, 'this-machine',
                          [G('a', 1, 0)], emulator_threads='isolate')


# this-machine: 2 CPUs on one node. guests (name, vCPUs), ratio,
# setting -> {name: (mode, emulator pin, rule)}
PLAN_CASES = [
    ('alone, guest', [('a', 1)], 1.0, GUEST,
     {'a': ('dedicated', '0', emuthreads.Rule.WITH_VCPUS)}),
    ('alone, shared: the free pCPU', [('a', 1)], 1.0, SHARED,
     {'a': ('dedicated', '1', emuthreads.Rule.POOL_FREE)}),
    ('two one-to-one, shared: node pool', [('a', 1), ('b', 1)], 1.0,
     SHARED, {'a': ('dedicated', '0-1', emuthreads.Rule.FALLBACK),
              'b': ('dedicated', '0-1', emuthreads.Rule.FALLBACK)}),
    ('node range, shared: with the vCPUs', [('a', 2), ('b', 1)], 2.0,
     SHARED, {'a': ('node-range', '0-1', emuthreads.Rule.WITH_VCPUS),
              'b': ('node-range', '0-1', emuthreads.Rule.WITH_VCPUS)}),
    ('host range, shared: with the vCPUs', [('a', 2), ('b', 2)], 1.5,
     SHARED, {'a': ('host-range', '0-1', emuthreads.Rule.WITH_VCPUS),
              'b': ('host-range', '0-1', emuthreads.Rule.WITH_VCPUS)}),
]


class TestPlans(testtools.TestCase):

    def test_cases(self):
        for name, guests, ratio, setting, expected in PLAN_CASES:
            gs = [G(n, v, 0, iothreads=1) for n, v in guests]
            _, p = make('this-machine', gs, ratio, emulator_threads=setting)
            got = {gp.name: (gp.mode, cpuset.format(gp.emulator_pin),
                             gp.emulator_rule) for gp in p.guests}
            self.assertEqual(expected, got, name)
            for gp in p.guests:  # the IOThread goes with the emulator
                self.assertEqual({1: gp.emulator_pin}, gp.iothread_pins,
                                 name)

    def test_random_hosts(self):
        # On every test host, with guests of every kind: ``shared`` moves
        # no vCPU, puts one-to-one guests' emulator and I/O threads on
        # their home node's pool, off every one-to-one vCPU unless the
        # node has no other pCPU, and leaves every other guest as
        # ``guest`` plans it.
        rnd = random.Random(26)
        seen = set()
        for host_name in hosts.ALL + hosts.BANKED:
            for ratio in (1.0, 2.0, 4.0):
                h, _ = make(host_name, [])
                nodes = [n for n, node in h.nodes.items() if node.cpus]
                guests = [G('g%d' % i, rnd.choice((1, 2, 4)),
                            rnd.choice(nodes + [None, nodes]),
                            iothreads=rnd.choice((0, 1, 2)))
                          for i in range(rnd.randint(1, 2 * len(h.cpus)))]
                _, before = make(host_name, guests, ratio,
                                 reserved_cpus=frozenset({min(h.cpus)}))
                _, after = make(host_name, guests, ratio,
                                reserved_cpus=frozenset({min(h.cpus)}),
                                emulator_threads=SHARED)
                held = {}
                for gp in after.guests:
                    if gp.mode == plan_mod.DEDICATED:
                        held.setdefault(gp.home_node, set()).update(
                            *gp.vcpu_pins.values())
                for old, new in zip(before.guests, after.guests):
                    where = '%s %s %s' % (host_name, ratio, new.name)
                    self.assertEqual(old.vcpu_pins, new.vcpu_pins, where)
                    self.assertEqual((old.mode, old.rule, old.reason),
                                     (new.mode, new.rule, new.reason),
                                     where)
                    self.assertEqual(dict.fromkeys(new.iothread_pins,
                                                   new.emulator_pin),
                                     new.iothread_pins, where)
                    seen.add(new.emulator_rule)
                    if new.mode != plan_mod.DEDICATED:
                        self.assertEqual(old.emulator_pin, new.emulator_pin,
                                         where)
                        continue
                    node_pool = after.pool_by_node[new.home_node]
                    self.assertLessEqual(new.emulator_pin, node_pool, where)
                    if new.emulator_rule == emuthreads.Rule.POOL_FREE:
                        self.assertFalse(new.emulator_pin &
                                         held[new.home_node], where)
                        self.assertEqual(node_pool - held[new.home_node],
                                         new.emulator_pin, where)
                    else:
                        self.assertEqual(emuthreads.Rule.FALLBACK,
                                         new.emulator_rule, where)
                        self.assertEqual(node_pool, held[new.home_node],
                                         where)
                        self.assertEqual(node_pool, new.emulator_pin, where)
        # The hosts above reach every rule.
        self.assertLessEqual(set(emuthreads.Rule), seen)

    def test_changes_move_only_emulator_and_iothreads(self):
        # A host planned with ``guest`` and applied, then ``shared``: the
        # vCPU pins stay, the emulator and IOThread pins move, and the
        # plan applied is a fixed point (no change left).
        guests = [G('a', 2, 0, iothreads=2), G('b', 4, 1, iothreads=1)]
        _, p = make('intel-2s-28c-ht', guests, 1.0)
        guests = applied(guests, p)
        self.assertEqual([], plan_mod.changes(p, guests))
        _, p = make('intel-2s-28c-ht', guests, 1.0, emulator_threads=SHARED)
        kinds = sorted((c.name, c.kind, str(c.index))
                       for c in plan_mod.changes(p, guests))
        self.assertEqual([('a', 'emulator', 'None'), ('a', 'iothread', '1'),
                          ('a', 'iothread', '2'), ('b', 'emulator', 'None'),
                          ('b', 'iothread', '1')], kinds)
        guests = applied(guests, p)
        self.assertEqual([], plan_mod.changes(p, guests))
