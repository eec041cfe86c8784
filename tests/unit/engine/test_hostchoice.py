"""The weights of the candidate hosts of one request (``hostchoice``):
spread while the fleet has room, best fit drawn per request when it
fills, overflow where others share already, losses last."""

import collections
import itertools

import testtools

from nova_pinning_hooks.engine import hostchoice
from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.engine.policy.options import Rules

GIB = 1024 * 1024  # KiB


def candidate(name, vcpus, pool=(8, 8), ratio=4.0, pending=0, request=2):
    s = summary_mod.Summary(
        Rules(ratio), tuple(summary_mod.Node(i, pool[i], vcpus[i], 64 * GIB, 0,
                                      False) for i in range(len(vcpus))),
        0, sum(vcpus), 0)
    return hostchoice.Candidate(name, s, pending, summary_mod.forecast(
        s, request, request * GIB, pending))


def ranked(cands, uuid, spread_below=0.0):
    w = hostchoice.weights(cands, uuid, spread_below)
    return [c.name for _, c in sorted(zip(w, cands),
                                      key=lambda p: -p[0])]


def share_of(cands):
    """How much the node's fill counts for these candidates."""
    return hostchoice.fit_share(hostchoice.fleet_fill(cands))


class TestBands(testtools.TestCase):

    def test_bands_never_overlap(self):
        """Any one-to-one host above any no-change host, any no-change
        host above any loss, whatever the draw and the fleet's fill."""
        cands = [candidate('fits-tight', (6, 4)),
                 candidate('fits-loose', (0, 0)),
                 candidate('shared', (12, 12)),
                 candidate('shared-full', (30, 32), pool=(8, 8)),
                 candidate('loses', (8, 8))]
        for fill_fleet in (0.0, 0.5, 1.0):
            for uuid in ('a', 'b', 'c', 'd'):
                w = [hostchoice.weight(c, fill_fleet, uuid) for c in cands]
                self.assertTrue(all(-1.0 <= x <= 1.0 for x in w), w)
                self.assertGreater(min(w[:2]), max(w[2:4]), w)
                self.assertGreater(min(w[2:4]), w[4], w)
                self.assertGreaterEqual(min(w[2:4]), 0.0, w)
                self.assertLess(max(w[2:4]), summary_mod.FIT_FLOOR, w)

    def test_overflow_goes_where_others_share_most(self):
        """No host has room one-to-one: the fullest inventory first, so
        that the others stay within their pools."""
        light = candidate('light', (12, 12))
        heavy = candidate('heavy', (30, 30))
        w = hostchoice.weights([light, heavy], 'x')
        self.assertGreater(w[1], w[0])

    def test_losses_as_summary_scores_them(self):
        c = candidate('loses', (8, 8))
        self.assertEqual(summary_mod.score(c.forecast),
                         hostchoice.weight(c, 1.0, 'x'))


class TestFit(testtools.TestCase):

    def test_spread_while_the_fleet_has_room(self):
        """With the bands at every fill (``spread_below`` 0): below
        FIT_START the one-to-one hosts weigh within TIE_DRAW of
        the band of each other, whatever their fill: nova's own weighers
        spread the guests as without the package wherever they tell the
        hosts apart (a twentieth of the band: 0.01 of nova's normalised
        weight)."""
        cands = [candidate('a', (6, 4)), candidate('b', (0, 0)),
                 candidate('c', (1, 1))]
        self.assertLess(share_of(cands), 1e-9)
        span = (1 - summary_mod.FIT_FLOOR) * hostchoice.TIE_DRAW
        for uuid in ('u1', 'u2', 'u3'):
            w = hostchoice.weights(cands, uuid, spread_below=0.0)
            for x in w:
                self.assertGreaterEqual(x, summary_mod.FIT_FLOOR)
                self.assertLessEqual(x, summary_mod.FIT_FLOOR + span)

    def test_a_burst_on_hosts_alike_parts(self):
        """Eight requests weighed at once on four empty hosts (what nova's
        weighers weigh alike: they would all go to the first): with the
        bands at every fill, each request's own draw parts them."""
        alike = [candidate('empty%d' % i, (0, 0)) for i in range(4)]
        self.assertLess(share_of(alike), 1e-9)
        burst = collections.Counter(
            ranked(alike, 'burst-%d' % i)[0] for i in range(8))
        self.assertGreaterEqual(len(burst), 3, burst)
        self.assertLessEqual(max(burst.values()), 4, burst)

    def test_share_follows_the_fleets_fill(self):
        pool = 16 * 4  # four hosts
        for used, share in ((0, 0.0),
                            (int(pool * hostchoice.FIT_START), 0.0),
                            (pool, 1.0),
                            (pool * 2, 1.0)):
            per = [used // 4] * 4
            cands = [candidate(str(i), (v, 0), pool=(16, 0))
                     for i, v in enumerate(per)]
            self.assertAlmostEqual(share, share_of(cands),
                                   places=6)
        # pending vCPUs count too
        cands = [candidate('a', (0, 0), pending=15)]
        self.assertEqual(1.0, share_of(cands))

    def test_best_fit_drawn_per_request(self):
        """With the fleet full, the fuller node is drawn far more often,
        and not always: requests weighed on one view (a burst) spread
        over the hosts where they fit."""
        tight = candidate('tight', (6, 8))   # node 0 full after the guest
        mid = candidate('mid', (3, 8))
        loose = candidate('loose', (0, 8))
        full = [candidate('full%d' % i, (8, 12)) for i in range(5)]
        cands = [tight, mid, loose] + full
        self.assertEqual(1.0, share_of(cands))
        first = collections.Counter(
            ranked(cands, 'uuid-%d' % i)[0] for i in range(1000))
        self.assertLessEqual({'tight', 'mid'}, set(first))
        self.assertLessEqual(set(first), {'tight', 'mid', 'loose'})
        self.assertGreater(first['tight'], first['mid'])
        self.assertGreaterEqual(first['mid'], first['loose'])
        self.assertGreater(first['tight'], 600)
        self.assertLess(first['tight'], 990)
        # Eight requests at once, four hosts that each fit best: they do
        # not all meet on one (the old best fit sent all eight to the
        # first, which they overflowed).
        alike = [candidate('tight%d' % i, (6, 8)) for i in range(4)]
        burst = collections.Counter(
            ranked(alike + full, 'burst-%d' % i)[0] for i in range(8))
        self.assertGreaterEqual(len(burst), 3, burst)
        self.assertLessEqual(max(burst.values()), 4, burst)

    def test_the_draw_is_the_requests_own(self):
        """The same request weighs alike wherever it is weighed; the
        draws are spread over (0, 1]."""
        self.assertEqual(hostchoice.draw('u', 'h'),
                         hostchoice.draw('u', 'h'))
        draws = [hostchoice.draw(u, h) for u, h in itertools.product(
            ('a', 'b', 'c', 'd'), ('h1', 'h2', 'h3', 'h4', 'h5'))]
        self.assertEqual(len(draws), len(set(draws)))
        self.assertTrue(all(0 < d <= 1 for d in draws))
        self.assertGreater(max(draws) - min(draws), 0.5)


class TestSpreadBelow(testtools.TestCase):
    """``weigher_spread_below``: below it nova's spread stays as it was."""

    CANDS = (('fits', (2, 0)), ('shared', (12, 12)), ('loses', (8, 8)))

    def fleet(self, empty):
        """The three hosts above and ``empty`` empty ones (the fleet's
        fill falls with each)."""
        return [candidate(n, v) for n, v in self.CANDS] + [
            candidate('empty%d' % i, (0, 0)) for i in range(empty)]

    def test_every_host_alike_below_it(self):
        """A one-to-one host, a shared one and one where a guest would
        lose its binding weigh alike (0: nova's weighers alone choose),
        for every request."""
        cands = self.fleet(6)
        fill = hostchoice.fleet_fill(cands)
        self.assertLess(fill, 0.7 - hostchoice.SPREAD_RAMP)
        for uuid in ('a', 'b', 'c'):
            self.assertEqual([0.0] * len(cands),
                             hostchoice.weights(cands, uuid, 0.7))

    def test_zero_keeps_the_bands_at_every_fill(self):
        """0: the bands weigh, whatever the fill."""
        cands = self.fleet(6)
        w = hostchoice.weights(cands, 'a', spread_below=0.0)
        self.assertGreaterEqual(w[0], summary_mod.FIT_FLOOR)
        self.assertGreater(w[0], w[1])
        self.assertGreater(w[1], w[2])
        self.assertLess(w[2], 0.0)

    def test_the_bands_come_in_over_the_ramp(self):
        below, ramp = 0.7, hostchoice.SPREAD_RAMP
        for fill, bands in ((0.0, 0.0), (below - ramp, 0.0),
                            (below - ramp / 2, 0.5), (below, 1.0),
                            (1.5, 1.0)):
            self.assertAlmostEqual(bands, hostchoice.presence(fill, below),
                                   places=6, msg=fill)
        self.assertEqual(1.0, hostchoice.presence(0.0, 0.0))
        # part way, every weight is the bands' in proportion: the order
        # of the hosts stays the bands'
        cands = self.fleet(0)
        fill = hostchoice.fleet_fill(cands)
        half = hostchoice.weights(cands, 'a', fill + ramp / 2)
        whole = hostchoice.weights(cands, 'a', fill)
        for h, w in zip(half, whole):
            self.assertAlmostEqual(w / 2, h, places=9)

    def test_by_default_the_bands_weigh_at_every_fill(self):
        """The default: the bands at every fill (within the one-to-one
        band nova's spread chooses: ``TestFit``)."""
        self.assertEqual(0.0, hostchoice.SPREAD_BELOW)
        cands = self.fleet(6)
        self.assertEqual(hostchoice.weights(cands, 'a', 0.0),
                         hostchoice.weights(cands, 'a'))
