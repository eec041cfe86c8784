"""``OneToOneWeigher`` on stand-ins for nova's ``HostState`` and
``RequestSpec`` (nova itself: ``tests/nova/test_weigher.py``)."""

import logging
import time
import tracemalloc
import types

import fixtures
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import hostchoice
from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.nova import weigher as weigher_mod
from nova_pinning_hooks.engine.policy.options import Rules

GIB = 1024 * 1024


def text(vcpus, pool=(8, 8), ratio=4.0, cross=0, at=None):
    n = len(vcpus)
    return summary_mod.encode(summary_mod.Summary(
        Rules(ratio), tuple(summary_mod.Node(i, pool[i], vcpus[i], 64 * GIB, 0,
                                      False) for i in range(n)),
        cross, sum(vcpus) + cross, int(time.time()) if at is None else at))


def host(name, stats_text=None, vcpus_used=None, **stats):
    if stats_text is not None:
        stats[summary_mod.KEY] = stats_text
        if vcpus_used is None and '"v":1,' in stats_text:
            vcpus_used = summary_mod.decode(stats_text).seen
    return types.SimpleNamespace(host=name, stats=stats,
                                 vcpus_used=vcpus_used or 0, aggregates=[])


def spec(vcpus=2, memory_mb=2048, numa_topology=None, **extra_specs):
    return types.SimpleNamespace(
        flavor=types.SimpleNamespace(vcpus=vcpus, memory_mb=memory_mb,
                                     extra_specs=extra_specs),
        numa_topology=numa_topology)


def weigh(hosts, request):
    w = weigher_mod.OneToOneWeigher()
    return w.weigh_objects([types.SimpleNamespace(obj=h) for h in hosts],
                           request)


class TestWeights(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='nova_pinning_hooks', level=logging.INFO))
        weigher_mod.clear_cache()

    def test_spread_below_leaves_novas_choice_to_nova(self):
        """``weigher_spread_below`` (read from nova's configuration; its
        default without nova): a fleet far from full weighs neutral; by
        default the bands weigh."""
        hosts = [host('loses', text((8, 8))),
                 host('fits', text((0, 0))),
                 host('empty', text((0, 0), pool=(16, 16)))]
        with fixtures.MockPatchObject(hostchoice, 'SPREAD_BELOW', 0.7):
            self.assertEqual([0.0, 0.0, 0.0],
                             weigh(hosts, spec(vcpus=2)))
        w = weigh(hosts, spec(vcpus=2))
        self.assertLess(w[0], 0.0)
        self.assertGreaterEqual(w[1], summary_mod.FIT_FLOOR)

    def test_one_to_one_first_then_no_change_then_loss(self):
        hosts = [host('loses', text((8, 8))),
                 host('shared', text((12, 12))),
                 host('fits-tight', text((6, 4))),
                 host('fits-loose', text((0, 0))),
                 host('no-package', num_instances='3')]
        w = weigh(hosts, spec(vcpus=2))
        order = [h.host for _, h in sorted(zip(w, hosts),
                                           key=lambda p: -p[0])]
        # (which of the two one-to-one hosts first is the request's
        # draw: engine/hostchoice.py)
        self.assertEqual({'fits-tight', 'fits-loose'}, set(order[:2]))
        self.assertEqual(['shared', 'no-package', 'loses'], order[2:])
        self.assertGreaterEqual(min(w[2:4]), summary_mod.FIT_FLOOR)
        self.assertEqual(0.0, w[4])  # no summary: neutral
        self.assertEqual((-1.0, 1.0), (weigher_mod.OneToOneWeigher.minval,
                                       weigher_mod.OneToOneWeigher.maxval))

    def test_vcpus_placed_since_count(self):
        """nova placed 2 vCPUs there since the summary (or consumed them
        earlier in this request): node 0 is full, the next guest tips
        it."""
        s = text((6, 8))
        self.assertGreaterEqual(weigh([host('h', s)], spec(vcpus=2))[0],
                                summary_mod.FIT_FLOOR)
        self.assertLess(weigh([host('h', s, vcpus_used=16)],
                              spec(vcpus=2))[0], 0)

    def test_guests_nova_places_itself_are_neutral(self):
        hosts = [host('a', text((8, 8))), host('b', text((0, 0)))]
        for request in (spec(**{'hw:numa_nodes': '1'}),
                        spec(**{'hw:cpu_policy': 'dedicated'}),
                        spec(**{'hw:cpu_policy': 'mixed'}),
                        spec(**{'resources:PCPU': '2'}),
                        spec(numa_topology=object())):
            self.assertEqual([0.0, 0.0], weigh(hosts, request))
        self.assertNotEqual([0.0, 0.0], weigh(
            hosts, spec(**{'hw:cpu_policy': 'shared'})))

    def test_failures_are_neutral_and_logged_once_a_request(self):
        hosts = [host('good', text((0, 0))),
                 host('corrupt', 'not json'),
                 host('version-9', '{"v":9}'),
                 types.SimpleNamespace(host='odd', stats={
                     summary_mod.KEY: text((0, 0))}, vcpus_used='x')]
        w = weigh(hosts, spec())
        self.assertGreater(w[0], 0)
        self.assertEqual([0.0, 0.0, 0.0], w[1:])
        self.assertEqual(1, self.logs.output.count('neutral weight for 3 '
                                                   'host(s)'))
        self.assertIn('corrupt (SummaryError', self.logs.output)
        # A request it cannot read: every host neutral, one line.
        self.assertEqual([0.0] * 4, weigh(hosts, object()))
        self.assertIn('the request cannot be read', self.logs.output)

    def test_a_summary_claiming_more_cpus_than_nova_counts_is_neutral(self):
        # issue 48: ComputeNode.stats is any nova-compute's to write; a
        # summary of huge empty nodes weighed near 1 for every flavor.
        liar = host('liar', text((0, 0), pool=(4096, 4096)))
        liar.vcpus_total = 16  # nova's VCPU figure for the host
        honest = host('honest', text((0, 0)))
        honest.vcpus_total = 16
        w = weigh([liar, honest], spec(vcpus=2))
        self.assertEqual(0.0, w[0])
        self.assertGreater(w[1], 0.5)
        self.assertIn('liar (SummaryError: the summary claims 8192 pool '
                      'CPUs, nova counts 16)', self.logs.output)

    def test_the_instance_uuid_when_nova_set_it(self):
        """nova sets ``RequestSpec.instance_uuid`` for each instance it
        schedules; one without it raises on reading (not lazy-loadable):
        the request is still weighed, its draw from ''."""
        class Unset:
            flavor = spec().flavor
            numa_topology = None

            @property
            def instance_uuid(self):
                raise RuntimeError('attribute instance_uuid not '
                                   'lazy-loadable')
        self.assertEqual('', weigher_mod.request_of(Unset()).uuid)
        given = spec()
        given.instance_uuid = 'u-1'
        self.assertEqual('u-1', weigher_mod.request_of(given).uuid)
        self.assertNotEqual([0.0], weigh([host('a', text((1, 0)))],
                                         Unset()))

    def test_one_host_as_nova_asks(self):
        w = weigher_mod.OneToOneWeigher()
        # one empty host: the fleet has room, no fit counts (the
        # request's draw within TIE_DRAW of the band)
        got = w._weigh_object(host('h', text((0, 0))),
                              spec(vcpus=2, memory_mb=2048))
        self.assertGreaterEqual(got, summary_mod.FIT_FLOOR)
        self.assertLessEqual(got, summary_mod.FIT_FLOOR + (
            1 - summary_mod.FIT_FLOOR) * hostchoice.TIE_DRAW)

    def test_summaries_decoded_once(self):
        hosts = [host('a', text((1, 0))), host('b', text((1, 0)))]
        calls = []
        real = summary_mod.decode
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.engine.summary.decode',
            lambda t: calls.append(t) or real(t)))
        for _ in range(3):
            weigh(hosts, spec())
        self.assertEqual(1, len(calls))

    def test_a_summary_whose_time_alone_changed_stays_decoded(self):
        """The cache is keyed by the text after the pass time: a host
        whose passes ran again without changing its counts is not decoded
        again, and its summary has the new time."""
        now = int(time.time())
        texts = {at: text((1, 0), at=at) for at in range(now - 5, now)}
        second = text((2, 0))
        calls = []
        real = summary_mod.decode
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.engine.summary.decode',
            lambda t: calls.append(t) or real(t)))
        for at, first in texts.items():
            self.assertEqual(at, weigher_mod.summary_of(first).at)
            weigh([host('a', first, vcpus_used=1)], spec())
        self.assertEqual(1, len(calls))
        self.assertIsNot(None, weigher_mod.summary_of(second))
        self.assertEqual(2, len(calls))
        # Not the pass time first (another writer): keyed whole.
        other = '{' + first[len('{"t":%d,' % (now - 1)):-1] + \
            ',"t":%d}' % (now - 1)
        self.assertEqual(real(first), weigher_mod.summary_of(other))
        self.assertEqual(3, len(calls))
        # A time beyond the bounds is refused even when the rest is known.
        self.assertRaises(summary_mod.SummaryError, weigher_mod.summary_of,
                          '{"t":%d,' % (1 << 40) + first.split(',', 1)[1])

    def test_the_cache_drops_the_least_recently_used(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.weigher.CACHE_LIMIT', 3))
        texts = [text((i, 0)) for i in range(5)]
        calls = []
        real = summary_mod.decode
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.engine.summary.decode',
            lambda t: calls.append(t) or real(t)))
        for t in texts[:3]:
            weigher_mod.summary_of(t)
        weigher_mod.summary_of(texts[0])  # used again: kept
        weigher_mod.summary_of(texts[3])  # drops texts[1], not all
        self.assertEqual(4, len(calls))
        weigher_mod.summary_of(texts[0])
        weigher_mod.summary_of(texts[2])
        weigher_mod.summary_of(texts[3])
        self.assertEqual(4, len(calls))
        weigher_mod.summary_of(texts[1])
        self.assertEqual(5, len(calls))

    def test_a_text_decode_refuses_never_hits_the_cache(self):
        # issue 60 (informational): the cache was keyed by the text after
        # the pass time, so the tail of a stamped text, itself no JSON,
        # was taken from the cache although decode refuses it.
        first = text((1, 0))
        weigher_mod.summary_of(first)
        tail = first.split(',', 1)[1]
        self.assertRaises(summary_mod.SummaryError, summary_mod.decode, tail)
        self.assertRaises(summary_mod.SummaryError, weigher_mod.summary_of,
                          tail)

    def test_the_cache_is_bounded_by_bytes(self):
        # issue 60 (informational): 16,384 worst-case summaries took 301
        # MiB per scheduler worker. Worst case: 64 nodes, large numbers.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.weigher.CACHE_BYTES', 4 << 20))

        def worst(i):
            nodes = tuple(summary_mod.Node(
                n, 4000 + i, 8000 + n, (1 << 32) + i, (1 << 32) - 1, True)
                for n in range(summary_mod.MAX_NODES))
            return summary_mod.encode(summary_mod.Summary(
                Rules(16.0), nodes, 123456 + i, 654321,
                1764150000))
        texts = [worst(i) for i in range(400)]
        self.assertTrue(all(texts))
        tracemalloc.start()
        self.addCleanup(tracemalloc.stop)
        base = tracemalloc.get_traced_memory()[0]
        for t in texts:
            weigher_mod.summary_of(t)
        held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        counted = weigher_mod._CACHED_BYTES[0]
        self.assertLessEqual(counted, 4 << 20)
        self.assertLess(len(weigher_mod._CACHE), 400)
        # What the count says is at least what Python holds.
        self.assertLessEqual(held, counted)

    def test_a_summary_too_old_never_weighs(self):
        """A compute that stopped saving its node (nova-compute down)
        leaves its last summary in nova's database: older than
        summary_max_age and the slack, it weighs neutral."""
        limit = conf_mod.DEFAULT_SUMMARY_MAX_AGE + weigher_mod.AGE_SLACK
        now = int(time.time())
        fresh = host('fresh', text((6, 0), at=now - int(limit) + 5))
        old = host('old', text((6, 0), at=now - int(limit) - 5))
        w = weigh([fresh, old], spec(vcpus=2))
        self.assertGreater(w[0], 0.5)
        self.assertEqual(0.0, w[1])
        self.assertIn('old (StaleSummary: summary of a pass',
                      self.logs.output)
        # The same counts, fresh again: weighed.
        again = host('old', text((6, 0), at=now))
        self.assertGreaterEqual(weigh([again], spec(vcpus=2))[0],
                                summary_mod.FIT_FLOOR)

    def test_a_bad_summary_is_logged_once_a_host_an_interval(self):
        clock = [1000000.0]
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.weigher.time.time', lambda: clock[0]))
        w = weigher_mod.OneToOneWeigher()
        objs = [types.SimpleNamespace(obj=host('bad', 'not json')),
                types.SimpleNamespace(obj=host('worse', '{"v":9}'))]
        for _ in range(5):
            self.assertEqual([0.0, 0.0], w.weigh_objects(objs, spec()))
        self.assertEqual(1, self.logs.output.count('bad (SummaryError'))
        self.assertEqual(1, self.logs.output.count('worse (SummaryError'))
        clock[0] += weigher_mod.COMPLAINT_INTERVAL - 1
        w.weigh_objects(objs[:1], spec())
        self.assertEqual(1, self.logs.output.count('bad (SummaryError'))
        clock[0] += 2
        w.weigh_objects(objs, spec())
        self.assertEqual(2, self.logs.output.count('bad (SummaryError'))
        self.assertEqual(2, self.logs.output.count('worse (SummaryError'))

    def test_multiplier_without_nova_is_the_default(self):
        w = weigher_mod.OneToOneWeigher()
        self.assertEqual(conf_mod.DEFAULT_WEIGHER_MULTIPLIER,
                         w.weight_multiplier(host('a')))
        w.weight_multiplier(host('b'))
        self.assertEqual(1, self.logs.output.count('aggregate multipliers '
                                                   'not read'))
