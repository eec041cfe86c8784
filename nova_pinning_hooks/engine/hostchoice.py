"""How the one-to-one weigher weighs the candidate hosts of one request
against each other (``nova/weigher.py``), from each host's forecast
(``summary.forecast``).

By default the bands weigh at every fill, and within the one-to-one band
nova's weighers spread the guests as without the package while the
fleet has room (below). An operator who wants nova's spread as it was
at a low load, even where it costs one-to-one binding (a mixed fleet's
large hosts filled first while small ones stay empty), sets
``spread_below`` (``[nova_pinning] weigher_spread_below``): while the
candidates' vCPUs are below that share of their pool pCPUs every host
weighs 0, nova's weighers alone choose; over ``SPREAD_RAMP`` up to it
the bands come in, and from it they weigh wholly.

Three bands, as ``summary.score`` has them, so that with a multiplier
large enough the band decides and nova's own weighers choose within it:

* **one-to-one** (``summary.FIT_FLOOR`` to 1): the guest would be
  one-to-one there. How much the node's fill counts follows the fleet:
  while the candidates' pools are far from full (their vCPUs below
  ``FIT_START`` of their pool pCPUs) such hosts weigh within
  ``TIE_DRAW`` of the band's span of each other, by the request's own
  draw: nova's weighers spread the guests as without the package
  wherever they tell the hosts apart, and requests weighed at once on
  hosts they weigh alike (a burst on a fleet of identical hosts) part
  instead of all going to the first of them; from ``FIT_FULL`` on, the
  host is drawn at random, the fuller its node would be the likelier
  (best fit keeps the larger holes for larger guests), and in between a
  share of each. The draw is the request's own (its instance uuid and
  the host's name): the same request weighs alike on every scheduler
  worker, and requests weighed at once on the same view (a burst on
  several workers, before any of their claims reaches nova's database)
  spread over the hosts where they fit instead of all meeting on the
  fullest node, which they would overflow;
* **no change** (0 to ``OVERFLOW_TOP``): nobody gains or loses
  one-to-one binding (a node range or the host range already); the
  fuller the host's VCPU inventory (its vCPUs over pool x ratio), the
  higher: guests that cannot be one-to-one anywhere go where others
  already share, and the other hosts stay within their pools;
* **loss** (below 0): ``summary.score``.

Invariants:

* pure: no I/O, no clock; the draw is a checksum of its inputs;
* every weight lies in [-1, 1], and from ``spread_below`` on the bands
  never overlap: any one-to-one host above any no-change host, any
  no-change host above any loss; below ``spread_below - SPREAD_RAMP``
  every host weighs 0;
* a host's weight depends on the other candidates only through the
  fleet's fill (``fleet_fill``), and on nothing else of the request than
  its forecast and its uuid.
"""

import math
import typing
import zlib

from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import summary as summary_mod

# The fleet's fill (the candidates' vCPUs over their pool pCPUs) below
# which the node's fill does not count, and from which it counts wholly
# (benchmarks/fleet.py: doc/source/reference/performance.rst, "In bursts").
FIT_START = 0.65
FIT_FULL = 0.9
# The draw's part of the one-to-one band while the fleet has room: 0.05
# of the band is 0.01 of nova's normalised weight, 0.3 at the default
# multiplier: less than nova's spread weighers tell apart two hosts one
# guest apart, enough to part requests on hosts they weigh alike
# (benchmarks/fleet.py and the burst model: reference/performance.rst).
TIE_DRAW = 0.05
# How strongly the draw favours the fuller node: a node full after the
# guest is drawn e**FIT_BIAS times as readily as an empty one.
FIT_BIAS = 10.0
# The top of the no-change band (a host whose VCPU inventory is full).
OVERFLOW_TOP = 0.4
# ``weigher_spread_below``'s default: the bands at every fill, nova's
# spread kept within the one-to-one band. 0.7 gives nova's choices
# exactly at load 0.5 in benchmarks/fleet.py and keeps the gains from
# 0.8 on; inside nova, four computes filled from empty in bursts of 2
# lost the weigher's gain with it (reference/performance.rst, "Spread
# kept").
SPREAD_BELOW = 0.0
SPREAD_RAMP = 0.1


class Candidate(typing.NamedTuple):
    """One host as the choice sees it."""

    name: str
    summary: summary_mod.Summary
    pending: int  # vCPUs nova placed there since the summary
    forecast: summary_mod.Forecast


def vcpus(c: Candidate) -> int:
    """The host's vCPUs before the guest: the summary's and those placed
    since."""
    s = c.summary
    return sum(n.vcpus for n in s.nodes) + s.cross + max(0, c.pending)


def fleet_fill(candidates: typing.Iterable[Candidate]) -> float:
    """The candidates' vCPUs over their pool pCPUs (0 without pools)."""
    used = pool = 0
    for c in candidates:
        used += vcpus(c)
        pool += c.summary.pool
    return used / pool if pool else 0.0


def fit_share(fill: float) -> float:
    """How much the node's fill counts, 0 to 1, at the fleet's ``fill``
    (``fleet_fill``)."""
    return min(1.0, max(0.0, (fill - FIT_START) / (FIT_FULL - FIT_START)))


def presence(fill: float, spread_below: float = SPREAD_BELOW) -> float:
    """How much the bands weigh, 0 to 1, at the fleet's ``fill``."""
    if spread_below <= 0:
        return 1.0
    return min(1.0, max(0.0, (fill - spread_below) / SPREAD_RAMP + 1))


def draw(uuid: str, host: str) -> float:
    """The request's draw for a host, in (0, 1]: the same on every
    scheduler worker, independent between requests and hosts."""
    value = zlib.crc32(('%s/%s' % (uuid, host)).encode('utf-8', 'replace'))
    return (value + 1) / (1 << 32)


def weight(c: Candidate, share: float, uuid: str,
           bands: float = 1.0) -> float:
    """The raw weight of one candidate, in [-1, 1], by how much the bands
    weigh (``presence``)."""
    return bands * _banded(c, share, uuid) if bands > 0 else 0.0


def _banded(c: Candidate, share: float, uuid: str) -> float:
    f = c.forecast
    if f.mode == plan_mod.DEDICATED:
        fill = min(1.0, f.home_vcpus / max(f.home_pool, 1))
        u = draw(uuid, c.name)
        # Drawn in proportion to e**(FIT_BIAS * fill): the largest of
        # u ** (1 / w) over the hosts falls on each in proportion to w.
        fit = float(u ** (1 / math.exp(FIT_BIAS * (fill - 1))))
        part = share * fit + (1 - share) * TIE_DRAW * u
        return summary_mod.FIT_FLOOR + (1 - summary_mod.FIT_FLOOR) * part
    if f.lost:
        return summary_mod.score(f)
    inventory = c.summary.pool * c.summary.ratio
    full = (vcpus(c) + f.vcpus) / inventory if inventory > 0 else 1.0
    return OVERFLOW_TOP * min(1.0, max(0.0, full))


def weights(candidates: typing.Sequence[typing.Optional[Candidate]],
            uuid: str, spread_below: float = SPREAD_BELOW
            ) -> list[typing.Optional[float]]:
    """The weight of each candidate (None for None: a host that cannot
    be weighed)."""
    fill = fleet_fill(c for c in candidates if c is not None)
    share = fit_share(fill)
    bands = presence(fill, spread_below)
    return [None if c is None else weight(c, share, uuid, bands)
            for c in candidates]
