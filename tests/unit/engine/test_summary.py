"""The scheduler's view of a host (``summary``): what a host reports, what
the next pass would give one more guest there, and its weight.

Tables for the forecast and the score on hand-made summaries; then the
forecast against the engine itself: on random hosts and guests whose
homes come from facts, ``forecast`` of the host's summary is what
``policy.make_plan`` gives the guest once it is there.
"""

import dataclasses
import json

import hypothesis
from hypothesis import strategies as st
import testtools

from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine.policy import layout as layout_mod
from nova_pinning_hooks.engine.policy import options as options_mod
from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.engine import topology
from nova_pinning_hooks.engine.policy.options import Rules
from tests.unit import hosts
from tests.unit.engine.test_properties import random_host

GIB = 1024 * 1024  # KiB
DED, NR, CNR, HR, UNT = (plan_mod.DEDICATED, plan_mod.NODE_RANGE,
                         plan_mod.CROSS_NODE_RANGE, plan_mod.HOST_RANGE,
                         plan_mod.UNTOUCHED)


def S(vcpus, pool=(8, 8), ratio=4.0, cross=0, memory=None, homed=None,
      shared=()):
    """A summary: per node its homed vCPUs, pool, memory (KiB, default
    plenty) and homed memory."""
    n = len(vcpus)
    memory = memory or (64 * GIB,) * n
    homed = homed or (0,) * n
    return summary_mod.Summary(
        Rules(ratio), tuple(summary_mod.Node(i, pool[i], vcpus[i], memory[i],
                                      homed[i], i in shared)
                     for i in range(n)), cross, sum(vcpus) + cross, 0)


# (name, summary, candidate vCPUs, candidate KiB, pending,
#  mode, home, one-to-one before, after, score)
FORECASTS = [
    ('room on both: the least loaded node, one-to-one',
     S((4, 0)), 2, GIB, 0, DED, 1, 4, 6, 0.7),
    ('a tie: the lower node', S((4, 4)), 2, GIB, 0, DED, 0, 8, 10, 0.9),
    ('both full one-to-one: the first node tips into a node range',
     S((8, 8)), 2, GIB, 0, NR, 0, 16, 8, -0.6),
    ('fills a node exactly: still one-to-one, the best fit',
     S((6, 8)), 2, GIB, 0, DED, 0, 14, 16, 1.0),
    ('both shared already: nobody loses', S((12, 12)), 2, GIB, 0, NR, 0,
     0, 0, 0.0),
    ('one node shared, the other one-to-one: the one-to-one node has '
     'room first', S((12, 2)), 2, GIB, 0, DED, 1, 2, 4, 0.8),
    ('one node shared, the other full one-to-one: the less loaded by '
     'ratio, which tips it into a node range', S((12, 8)), 2, GIB, 0, NR,
     1, 8, 0, -0.6),
    ('a node shared far less than the other: joins it, nobody loses',
     S((12, 20)), 2, GIB, 0, NR, 0, 0, 0, 0.0),
    ('no node has room under the ratio: cross-node, on the pool left',
     S((30, 30)), 4, GIB, 0, CNR, None, 0, 0, 0.0),
    ('the host full: host range, already nobody one-to-one',
     S((32, 32)), 1, GIB, 0, HR, None, 0, 0, 0.0),
    ('cross-node load tips the host into host range (rule 3): node 0 '
     'loses its one-to-one', S((4, 0), ratio=1.0, cross=12), 2, GIB, 0,
     HR, 1, 4, 0, -0.4),
    ('guests nova placed float over node 0: never one-to-one there, '
     'but it is the least loaded', S((2, 6), shared=(0,)), 1, GIB, 0, NR,
     0, 6, 6, 0.0),
    ('node 1 lacks the memory: node 0 although fuller',
     S((4, 0), memory=(64 * GIB, 8 * GIB), homed=(0, 7 * GIB)), 2,
     2 * GIB, 0, DED, 0, 4, 6, 0.9),
    ('no node has the memory: cross-node', S((0, 0), memory=(GIB, GIB)),
     1, 2 * GIB, 0, CNR, None, 0, 0, 0.0),
    ('vCPUs placed since the summary fill node 0 first',
     S((6, 8)), 1, GIB, 2, NR, 0, 16, 8, -0.6),
    ('empty pool: untouched', S((0, 0), pool=(0, 0)), 1, GIB, 0, UNT, None,
     0, 0, 0.0),
    ('the whole pool lost: the floor', S((8,), pool=(8,)), 1, GIB, 0, NR,
     0, 8, 0, -1.0),
]


class TestForecast(testtools.TestCase):

    def test_table(self):
        for (name, s, vcpus, kib, pending, mode, home, before, after,
             weight) in FORECASTS:
            f = summary_mod.forecast(s, vcpus, kib, pending)
            self.assertEqual((mode, home, before, after),
                             (f.mode, f.home, f.before, f.after), name)
            self.assertAlmostEqual(weight, summary_mod.score(f), 9, name)

    def test_one_to_one_of_a_summary(self):
        self.assertEqual(14, S((6, 8)).one_to_one)
        self.assertEqual(8, S((12, 8)).one_to_one)
        self.assertEqual(0, S((32, 40)).one_to_one)  # host range

    def test_best_fit_first(self):
        """Of two hosts that give one-to-one, the one whose node is left
        with less room weighs more; any one-to-one outweighs no change,
        which outweighs any loss."""
        def weight(s, vcpus=2):
            return summary_mod.score(summary_mod.forecast(s, vcpus, GIB))
        self.assertGreater(weight(S((5, 6))), weight(S((1, 2))))
        self.assertGreater(weight(S((0, 0))), weight(S((12, 12))))
        self.assertGreater(weight(S((12, 12))), weight(S((8, 8))))
        self.assertEqual(summary_mod.FIT_FLOOR, weight(
            S((0,), pool=(1 << 20,)), 0))

    def test_score_bounds(self):
        for lost in range(0, 40):
            f = summary_mod.Forecast(NR, 0, lost, 0, 1, 16)
            self.assertTrue(-1.0 <= summary_mod.score(f) <= 0.0)
        self.assertEqual(-1.0, summary_mod.score(
            summary_mod.Forecast(HR, None, 64, 0, 1, 16)))


class TestEncoding(testtools.TestCase):

    def test_round_trip_and_size(self):
        s = S((4, 12), cross=3, homed=(GIB, 2 * GIB), shared=(1,))
        text = summary_mod.encode(s)
        self.assertEqual(s, summary_mod.decode(text))
        # A real 8-node host: 60 characters a node at most.
        big = summary_mod.Summary(
            Rules(4.0), tuple(summary_mod.Node(i, 64, 4096, 512 * GIB,
                                               400 * GIB, False)
                              for i in range(8)),
            100, 4196, 1732600000)
        self.assertLess(len(summary_mod.encode(big)), 60 + 8 * 60)

    def test_the_pass_time_first(self):
        """The weigher keys its decoded summaries by what follows the
        time (nova/weigher.py)."""
        s = S((4, 12))
        text = summary_mod.encode(s)
        self.assertTrue(text.startswith(
            summary_mod.TIME_PREFIX + '%d,' % s.at), text)

    def test_a_later_version_that_says_it_is_read_as_this_one(self):
        """A version 2 that keeps version 1's keys and adds its own says
        so (``COMPAT_KEY``): read as version 1, its new keys ignored."""
        s = S((4, 12), cross=3)
        good = json.loads(summary_mod.encode(s))
        later = dict(good, v=2, c=1, z=[1, 2])
        self.assertEqual(s, summary_mod.decode(json.dumps(later)))
        self.assertTrue(summary_mod.readable(1, None))
        self.assertFalse(summary_mod.readable(2, None))
        self.assertFalse(summary_mod.readable(2, 2))

    def test_beyond_the_bounds_no_summary(self):
        nodes = tuple(summary_mod.Node(i, 1, 0, 0, 0, False)
                      for i in range(summary_mod.MAX_NODES + 1))
        self.assertIsNone(summary_mod.encode(
            summary_mod.Summary(Rules(1.0), nodes, 0, 0, 0)))
        self.assertIsNone(summary_mod.encode(
            summary_mod.Summary(Rules(1.0), nodes[:1],
                                summary_mod.MAX_COUNT + 1, 0, 0)))

    def test_refused(self):
        good = json.loads(summary_mod.encode(S((1, 2))))
        cases = {
            'not text': 7,
            'too long': ' ' * (summary_mod.MAX_TEXT + 1),
            'not JSON': '{',
            'a list': '[]',
            'another version': dict(good, v=2),
            'a later version for its own readers': dict(good, v=2, c=2),
            'a compatibility not a version': dict(good, v=2, c=0),
            'a compatibility that is true': dict(good, v=2, c=True),
            'version true': dict(good, v=True),
            'no ratio': {k: v for k, v in good.items() if k != 'r'},
            'ratio 0': dict(good, r=0),
            'ratio text': dict(good, r='4'),
            'no nodes': dict(good, n=[]),
            'a short node': dict(good, n=[[0, 1, 2, 3, 4]]),
            'a negative count': dict(good, n=[[0, -1, 2, 3, 4, 0]]),
            'a count that is true': dict(good, n=[[0, True, 2, 3, 4, 0]]),
            'a float count': dict(good, n=[[0, 1.0, 2, 3, 4, 0]]),
            'shared 2': dict(good, n=[[0, 1, 2, 3, 4, 2]]),
            'nodes out of order': dict(good, n=[[1, 1, 0, 0, 0, 0],
                                                [0, 1, 0, 0, 0, 0]]),
            'the same node twice': dict(good, n=[[0, 1, 0, 0, 0, 0],
                                                 [0, 1, 0, 0, 0, 0]]),
            'a node id beyond Linux': dict(good, n=[[4096, 1, 0, 0, 0, 0]]),
            'too many nodes': dict(good, n=[[i, 1, 0, 0, 0, 0] for i in
                                            range(65)]),
            'no time': {k: v for k, v in good.items() if k != 't'},
            'a negative cross': dict(good, x=-1),
            'NaN': '{"v":1,"r":NaN}',
            'a key twice': '{"v":1,"v":1}',
        }
        for name, value in cases.items():
            text = value if isinstance(value, (str, int)) else \
                json.dumps(value)
            self.assertRaises(summary_mod.SummaryError, summary_mod.decode,
                              text)
            if isinstance(text, str):
                try:
                    summary_mod.decode(text)
                except summary_mod.SummaryError as exc:
                    self.assertNotIn('\n', str(exc), name)
                    self.assertLess(len(str(exc)), 200, name)


def guest(name, vcpus, kib, memory=None, numatune=None, active=True,
          numa_cells=False, pins=None, nova=True):
    return guest_mod.Guest.from_xml(
        hosts.domain_xml(name, vcpus, uuid='u-%s' % name, memory_kib=kib,
                         numatune=numatune, numa_cells=numa_cells,
                         pins=pins, nova=nova),
        active=active, memory_by_node_kib=memory or {})


@st.composite
def hosted_guests(draw):
    """(host, guests with homes from facts, ratio)."""
    host = draw(random_host())
    nodes = sorted(host.nodes)
    guests = []
    for i in range(draw(st.integers(0, 14))):
        vcpus = draw(st.integers(1, 8))
        kib = draw(st.integers(1, 6)) * GIB
        kind = draw(st.integers(0, 10))
        name = 'g%02d' % i
        if kind < 6 or kind == 10:  # memory on one node (10: not nova's)
            guests.append(guest(name, vcpus, kib,
                                {draw(st.sampled_from(nodes)): kib},
                                nova=kind != 10))
        elif kind == 6:  # memory over two nodes
            two = draw(st.lists(st.sampled_from(nodes), min_size=2,
                                max_size=2, unique=True)) \
                if len(nodes) > 1 else nodes * 2
            guests.append(guest(name, vcpus, kib,
                                dict.fromkeys(two, kib // 2)))
        elif kind == 7:  # no memory facts, a strict numatune
            guests.append(guest(name, vcpus, kib, numatune=str(
                draw(st.sampled_from(nodes)))))
        elif kind == 8:  # not running
            guests.append(guest(name, vcpus, kib, active=False))
        else:  # nova placed it: one pinned, one floating vCPU
            cpu = draw(st.sampled_from(sorted(host.cpus)))
            guests.append(guest(name, 2, kib, numa_cells=True,
                                pins={0: str(cpu), 1: '0-%d' % max(
                                    host.cpus)}))
    ratio = draw(st.sampled_from([1.0, 1.5, 2.0, 4.0]))
    return host, guests, ratio


def _cpus(host, most):
    """None, or a few of the host's CPUs (never all of them)."""
    cpus = sorted(host.cpus)
    return st.one_of(st.none(), st.lists(
        st.sampled_from(cpus), min_size=1, max_size=min(most, len(cpus) - 1),
        unique=True).map(frozenset)) if len(cpus) > 1 else st.none()


# How each field of ``policy.Options`` is drawn: a field without a row
# fails ``test_every_option_is_drawn`` (a new option must reach the
# forecast's property test, CONTRIBUTING.rst, "A new option of the
# binding policy").
OPTION_DRAWS = {
    'reserved_cpus': lambda host: _cpus(host, 2),
    'shared_cpus': lambda host: _cpus(host, 8).map(
        lambda c: None if c is None else host.cpus - c),
    'dedicated_cpus': lambda host: _cpus(host, 1),
    'foreign_domains': lambda host: st.sampled_from(
        options_mod.ForeignDomains.values()),
    'home_node_min_fraction': lambda host: st.sampled_from([0.5, 0.9, 1.0]),
    'set_home_node': lambda host: st.booleans(),
    'emulator_threads': lambda host: st.sampled_from(
        emuthreads.Setting.values()),
}


@st.composite
def policy_options(draw, host, ratio):
    """Every option of ``policy.Options`` drawn (the forecast must agree
    with the plan whatever they say, not only for the ratio)."""
    drawn = {name: draw(how(host)) for name, how in OPTION_DRAWS.items()}
    options = policy.Options(allocation_ratio=ratio, **drawn)
    try:
        policy.validate(host, options)
    except policy.PolicyError:
        hypothesis.assume(False)
    hypothesis.assume(layout_mod.guest_pool(host, (), options))
    return options


def one_to_one(p):
    return sum(len(gp.vcpu_pins) for gp in p.guests
               if gp.mode == plan_mod.DEDICATED)


class TestAgainstTheEngine(testtools.TestCase):

    def test_every_rule_is_on_the_wire(self):
        self.assertEqual(list(options_mod.Rules._fields),
                         list(summary_mod.RULE_KEYS))
        s = S((3, 2), ratio=1.5)
        self.assertEqual(s.rules, summary_mod.decode(
            summary_mod.encode(s)).rules)

    def test_every_option_is_drawn(self):
        fields = {f.name for f in dataclasses.fields(policy.Options)}
        self.assertEqual(fields - {'allocation_ratio'}, set(OPTION_DRAWS))

    @hypothesis.settings(max_examples=200, deadline=None)
    @hypothesis.given(hosted_guests(), st.integers(1, 10),
                      st.integers(1, 20), st.data())
    def test_forecast_is_the_next_plan(self, drawn, vcpus, gib, data):
        host, guests, ratio = drawn
        options = data.draw(policy_options(host, ratio))
        before = policy.make_plan(host, guests, options)
        s = summary_mod.decode(summary_mod.encode(summary_mod.of_plan(
            host, guests, before, options, 0)))
        kib = gib * GIB - 1024  # never a tie with whole GiB of memory
        f = summary_mod.forecast(s, vcpus, kib)
        new = guest('new', vcpus, kib)
        after = policy.make_plan(host, guests + [new], options)
        gp = after.guests[-1]
        self.assertEqual((gp.mode, gp.home_node), (f.mode, f.home))
        self.assertEqual(one_to_one(before), f.before)
        self.assertEqual(one_to_one(after), f.after)
        self.assertEqual(one_to_one(before), s.one_to_one)

    @hypothesis.settings(max_examples=100, deadline=None)
    @hypothesis.given(hosted_guests(), st.integers(1, 12),
                      st.integers(1, 8), st.integers(1, 4), st.data())
    def test_a_guest_placed_since(self, drawn, pending, vcpus, gib, data):
        """A guest nova placed after the summary was made: the pass homed
        it (its memory then followed), and the forecast homes its vCPUs
        the same way."""
        host, guests, ratio = drawn
        options = data.draw(policy_options(host, ratio))
        before = policy.make_plan(host, guests, options)
        s = summary_mod.of_plan(host, guests, before, options, 0)
        since = guest('since', pending, 0)
        placed = policy.make_plan(host, guests + [since], options)
        home = placed.guests[-1].home_node
        hypothesis.assume(home is not None)
        since = since._replace(memory_by_node_kib={home: 1})
        kib = gib * GIB - 1024
        f = summary_mod.forecast(s, vcpus, kib, pending)
        new = guest('new', vcpus, kib)
        after = policy.make_plan(host, guests + [since, new], options)
        gp = after.guests[-1]
        self.assertEqual((gp.mode, gp.home_node), (f.mode, f.home))
        self.assertEqual(one_to_one(after), f.after)
        self.assertEqual(one_to_one(placed), f.before)

    def test_of_plan_counts(self):
        host = topology.HostTopology.from_capabilities(hosts.capabilities(
            [[[0, 4], [1, 5]], [[2, 6], [3, 7]]]))
        guests = [guest('a', 2, GIB, {0: GIB}), guest('b', 3, 2 * GIB,
                                                      {1: 2 * GIB}),
                  guest('c', 2, GIB, {0: GIB // 2, 1: GIB // 2}),
                  guest('off', 4, GIB, active=False),
                  guest('foreign', 1, GIB, {0: GIB})._replace(nova=False)]
        options = policy.Options(allocation_ratio=2.0,
                                 reserved_cpus=frozenset((0,)))
        p = policy.make_plan(host, guests, options)
        s = summary_mod.of_plan(host, guests, p, options, 1732600000.7)
        self.assertEqual(
            (2.0, 2, 11, 1732600000), (s.ratio, s.cross, s.seen, s.at))
        self.assertEqual(
            [(0, 3, 3, 16 * GIB, 2 * GIB, False),
             (1, 4, 3, 16 * GIB, 2 * GIB, False)],
            [tuple(n) for n in s.nodes])


class TestReport(testtools.TestCase):
    """What nova-compute reports between passes: the last pass's summary
    less the guests nova no longer counts on the host."""

    @hypothesis.settings(max_examples=100, deadline=None)
    @hypothesis.given(hosted_guests(), st.data())
    def test_gone_guests_as_the_next_pass_would_count(self, drawn, data):
        host, guests, ratio = drawn
        options = policy.Options(allocation_ratio=ratio)
        # Guests nova placed itself stay counted until a pass (their
        # pCPUs left the pool): only the others may go here. Domains
        # nova did not create are never in its tracker, and stay.
        removable = [g.uuid for g in guests if g.nova and not g.nova_placed]
        gone = set(data.draw(st.lists(st.sampled_from(removable),
                                      unique=True)
                             if removable else st.just([])))
        plan = policy.make_plan(host, guests, options)
        b = summary_mod.basis(host, guests, plan, options, 5)
        tracked = {g.uuid for g in guests
                   if g.nova and g.uuid not in gone} | {'x'}
        rest = [g for g in guests if g.uuid not in gone]
        expected = summary_mod.of_plan(
            host, rest, policy.make_plan(host, rest, options), options, 5)
        self.assertEqual(expected, summary_mod.report(b, tracked))

    def test_nothing_known_nothing_taken_out(self):
        host = topology.HostTopology.from_capabilities(hosts.capabilities(
            [[[0, 2], [1, 3]]]))
        guests = [guest('a', 2, GIB, {0: GIB})]
        options = policy.Options(allocation_ratio=1.0)
        b = summary_mod.basis(host, guests, policy.make_plan(
            host, guests, options), options, 5)
        self.assertEqual(b.summary, summary_mod.report(b, None))
        self.assertEqual(b.summary, summary_mod.report(b, set()))
        self.assertEqual(0, summary_mod.report(b, {'other'}).seen)

    def test_basis_file(self):
        host = topology.HostTopology.from_capabilities(hosts.capabilities(
            [[[0, 4], [1, 5]], [[2, 6], [3, 7]]]))
        guests = [guest('a', 2, GIB, {0: GIB}),
                  guest('c', 2, GIB, {0: GIB // 2, 1: GIB // 2}),
                  guest('off', 1, GIB, active=False)]
        options = policy.Options(allocation_ratio=2.0)
        b = summary_mod.basis(host, guests, policy.make_plan(
            host, guests, options), options, 9)
        data = json.loads(json.dumps(summary_mod.basis_to_json(b)))
        self.assertEqual(b, summary_mod.basis_from_json(data))
        self.assertEqual({'u-a': (2, 0, GIB), 'u-c': (2, -1, 0),
                          'u-off': (1, -2, 0)},
                         {u: tuple(e) for u, e in b.entries.items()})
        for bad in ({}, dict(data, version=2), dict(data, summary='x'),
                    dict(data, guests=[]),
                    dict(data, guests={'u': [1, 7, 0]}),
                    dict(data, guests={'u': [1, True, 0]}),
                    dict(data, guests={'u': [-1, 0, 0]}),
                    dict(data, guests={'u': [1, 0]})):
            self.assertRaises(summary_mod.SummaryError,
                              summary_mod.basis_from_json, bad)

    def test_modes(self):
        self.assertEqual({0: DED, 1: NR}, S((8, 9)).modes())
        self.assertEqual({0: HR, 1: HR}, S((40, 0)).modes())
        self.assertEqual({0: UNT}, S((0,), pool=(0,)).modes())
