"""The sampling arithmetic: rates from two samples, node sums, and the
guests that appear, vanish, restart or change vCPUs in between (what
status and top show of them: tests/unit/observe/test_steal.py)."""


import testtools

from nova_pinning_hooks.engine import steal

S = 1_000_000_000  # ns in a second


def guest(name, *vcpus):
    """A sample entry: vcpus as (time ns, delay ns) per index."""
    return {'name': name, 'vcpus': {i: {'time': t, 'delay': d}
                                    for i, (t, d) in enumerate(vcpus)}}


def with_vcpus(name, vcpus):
    return {'name': name, 'vcpus': {i: {'time': t, 'delay': d}
                                    for i, (t, d) in vcpus.items()}}


class TestRates(testtools.TestCase):

    # (what, before, after, wall s, expected {uuid: (state, steal, cpu,
    #  worst, [per-vCPU steal])})
    CASES = [
        ('steady: half CPU, a quarter steal',
         {'a': guest('a', (0, 0))},
         {'a': guest('a', (S, S // 2))}, 2.0,
         {'a': ('measured', 25.0, 50.0, 25.0, [25.0])}),
        ('guest figure is the mean over vCPUs; worst is the max',
         {'a': guest('a', (0, 0), (0, 0))},
         {'a': guest('a', (S, S), (S, 0))}, 2.0,
         {'a': ('measured', 25.0, 50.0, 50.0, [50.0, 0.0])}),
        ('idle guest: zero, not None',
         {'a': guest('a', (5, 5))}, {'a': guest('a', (5, 5))}, 1.0,
         {'a': ('measured', 0.0, 0.0, 0.0, [0.0])}),
        ('appeared between samples: new, no figure',
         {}, {'b': guest('b', (S, S))}, 1.0,
         {'b': ('new', None, None, None, [])}),
        ('vanished between samples: left out',
         {'a': guest('a', (0, 0)), 'gone': guest('gone', (0, 0))},
         {'a': guest('a', (S, 0))}, 1.0,
         {'a': ('measured', 0.0, 100.0, 0.0, [0.0])}),
        ('restarted (time went back): new, never negative',
         {'a': guest('a', (10 * S, 3 * S))},
         {'a': guest('a', (S, 0))}, 1.0,
         {'a': ('new', None, None, None, [])}),
        ('restarted (delay went back, time did not): new',
         {'a': guest('a', (S, 3 * S))},
         {'a': guest('a', (2 * S, 0))}, 1.0,
         {'a': ('new', None, None, None, [])}),
        ('vCPU hot-plugged: measured vCPUs only, partial',
         {'a': guest('a', (0, 0))},
         {'a': guest('a', (S, S // 10), (S, S))}, 1.0,
         {'a': ('partial', 10.0, 100.0, 10.0, [10.0])}),
        ('vCPU unplugged: the rest measured, partial',
         {'a': guest('a', (0, 0), (0, 0))},
         {'a': guest('a', (S // 2, 0))}, 1.0,
         {'a': ('partial', 0.0, 50.0, 0.0, [0.0])}),
        ('only a new vCPU: partial with no figure',
         {'a': with_vcpus('a', {0: (0, 0)})},
         {'a': with_vcpus('a', {1: (S, S)})}, 1.0,
         {'a': ('partial', None, None, None, [])}),
        ('counters ahead of the wall clock: clamped to 100',
         {'a': guest('a', (0, 0))},
         {'a': guest('a', (S + 10, S + 10))}, 1.0,
         {'a': ('measured', 100.0, 100.0, 100.0, [100.0])}),
        ('no interval: no figures at all',
         {'a': guest('a', (0, 0))}, {'a': guest('a', (S, S))}, 0.0,
         {'a': ('new', None, None, None, [])}),
    ]

    def test_table(self):
        for what, before, after, wall, expected in self.CASES:
            got = steal.rates(before, after, wall)
            self.assertEqual(set(expected), set(got), what)
            for uuid, (state, st, cpu, worst, per_vcpu) in expected.items():
                r = got[uuid]
                self.assertEqual(
                    (state, st, cpu, worst, per_vcpu),
                    (r.state, r.steal_pct, r.cpu_pct,
                     r.worst_vcpu_steal_pct,
                     [v.steal_pct for v in r.vcpus]), what)

    def test_demand_counts_waiting_and_running(self):
        got = steal.rates({'a': guest('a', (0, 0), (0, 0))},
                          {'a': guest('a', (S, S), (S // 2, 0))}, 2.0)
        # vCPU 0 wanted 2 s of 2 (one CPU), vCPU 1 0.5 s of 2.
        self.assertAlmostEqual(1.25, got['a'].demand_cpus)


class TestNodes(testtools.TestCase):

    def test_demand_against_pool_and_worst_guest(self):
        rates = steal.rates(
            {'a': guest('a', (0, 0)), 'b': guest('b', (0, 0)),
             'c': guest('c', (0, 0)), 'x': guest('x', (0, 0))},
            {'a': guest('a', (S // 2, S // 2)), 'b': guest('b', (S, 0)),
             'c': guest('c', (S // 4, S // 4)), 'x': guest('x', (S, 0))},
            1.0)
        loads = steal.node_load(rates, {'a': 0, 'b': 0, 'c': 1, 'x': None},
                                {0: 1, 1: 4, 2: 2})
        self.assertEqual(
            [(0, 2, 2.0, 1, 'a', 50.0), (1, 1, 0.5, 4, 'c', 25.0),
             (2, 0, 0.0, 2, None, None), (None, 1, 1.0, 0, 'x', 0.0)],
            [(n.node, n.guests, n.demand_cpus, n.pool_cpus, n.worst_guest,
              n.worst_steal_pct) for n in loads])

    def test_guest_on_unknown_node_counts_as_without_home(self):
        rates = steal.rates({}, {'a': guest('a', (0, 0))}, 1.0)
        loads = steal.node_load(rates, {'a': 7}, {0: 2})
        self.assertEqual([(0, 0), (None, 1)],
                         [(n.node, n.guests) for n in loads])
        # A new guest has no figure: it is never the worst.
        self.assertIsNone(loads[1].worst_guest)

    def test_by_steal_worst_first_unmeasured_last(self):
        rates = steal.rates(
            {'a': guest('a', (0, 0)), 'b': guest('b', (0, 0))},
            {'a': guest('a', (0, S // 10)), 'b': guest('b', (0, S // 2)),
             'n': guest('n', (0, 0))}, 1.0)
        self.assertEqual(['b', 'a', 'n'],
                         [r.name for r in steal.by_steal(rates)])
