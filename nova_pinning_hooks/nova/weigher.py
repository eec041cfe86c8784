"""``OneToOneWeigher``: nova's scheduler places guests where the package
can bind them one-to-one.

Enabled in nova-scheduler's configuration, beside nova's own weighers
(``[filter_scheduler] weight_classes`` is a list option: one line, the
class paths separated by commas; a second line would replace the
first)::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers,
        nova_pinning_hooks.nova.weigher.OneToOneWeigher

(one line in the file, cut here).

For each candidate host it reads the summary the host's nova-compute
reports (``summary.KEY`` in ``HostState.stats``: ``nova.nodesummary``),
adds the vCPUs nova placed there since (``HostState.vcpus_used`` above
the summary's ``seen``: claims the compute has saved since, and the
instances consumed earlier in the same request by
``HostState.consume_from_request``), asks what the host's next pass
would give the guest (``summary.forecast``), and weighs the candidates
against each other (``engine/hostchoice.py``: one-to-one first, spread
while the fleet has room and drawn per request, the fuller the node the
likelier, as it fills; then no change, the fuller host first; guests
losing their one-to-one binding last, the more the worse).

Invariants:

* nothing remote and nothing that blocks: it reads the ``HostState``
  objects and the ``RequestSpec`` it is handed; a summary is decoded
  once for as long as its text after the pass time stays the same (a
  cache of at most ``CACHE_LIMIT`` summaries and ``CACHE_BYTES``, the
  least recently used dropped);
* never raises into the scheduler: a host it cannot weigh gets the
  neutral weight 0, logged once a host every ``COMPLAINT_INTERVAL``;
* neutral (0 for every host) for guests nova places itself, those with
  an instance NUMA topology (``RequestSpec.numa_topology``, from
  ``hw:numa_nodes``, ``hw:cpu_policy`` dedicated or mixed, ``PCPU``
  resources or the same image properties), and for a host that reports
  no summary (no package there, or a summary too old: the compute's
  ``summary_max_age``, and in the scheduler that plus ``AGE_SLACK``);
* fixed bounds: ``minval`` -1 and ``maxval`` 1, so nova's normalisation
  maps every weight to the same place whatever the other hosts weigh
  (0.5 neutral; one-to-one 0.8 to 1; no change 0.5 to 0.7; a loss 0 to
  0.4): bands 0.1 apart, so that with a multiplier above 10 times the
  span of the other weighers the band decides (doc/source/admin/nova.rst);
* ``[nova_pinning] weigher_spread_below`` (0: the bands at every fill)
  is read at its start with the multiplier: below that fill of the
  candidates' pools every host weighs 0 (``hostchoice``);
* its multiplier is ``[nova_pinning] weigher_multiplier``, overridden
  per aggregate by the metadata key ``nova_pinning_weigher_multiplier``
  (``nova.scheduler.utils.get_weight_multiplier``, as nova's own);
* importable without nova (the base class is then ``object``): only
  nova-scheduler loads it, by class path.
"""

import collections
import re
import sys
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import hostchoice
from nova_pinning_hooks.engine import summary as summary_mod

try:
    from nova.scheduler import weights as _nova_weights
    _Base: typing.Any = _nova_weights.BaseHostWeigher
except ImportError:  # no nova here: the class is only for nova-scheduler
    _Base = object

LOG = logging.getLogger(__name__)
AGGREGATE_KEY = 'nova_pinning_weigher_multiplier'
NEUTRAL = 0.0
# Summaries kept decoded, the least recently used dropped first: more
# than the hosts of the largest cell (nova's max_placement_results is
# 1,000 by default).
CACHE_LIMIT = 16384
# And at most this many bytes of them, as ``_cost`` counts a text and its
# summary (at least what Python holds for them; a worst-case summary, 64
# nodes in 4 KiB, about 20 KiB): 16,384 worst-case summaries took 301
# MiB per scheduler worker before (issue 60), now at most 64 MiB; typical
# ones (2 nodes, 200 characters: about 1.7 KiB) are held by count.
CACHE_BYTES = 64 << 20
# A host whose summary cannot be weighed is logged once in this many
# seconds (a bad summary stays until its compute saves another).
COMPLAINT_INTERVAL = 600.0
# A summary is too old to weigh once it is older than the compute's
# ``summary_max_age`` by more than this: the compute saves its node at
# least once a minute (nova's audit), with a summary at most
# ``summary_max_age`` old; two audits' worth for clocks a little apart.
AGE_SLACK = 120.0
# Flavor extra specs of guests nova places itself (each also gives the
# request a NUMA topology; checked in case the request lacks it).
NUMA_SPECS = ('hw:numa_nodes', 'hw:cpu_policy', 'resources:PCPU',
              'hw:cpu_dedicated_mask')
SHARED_POLICIES = (None, '', 'shared')

_CACHE: collections.OrderedDict[str, tuple[summary_mod.Summary, int]] = \
    collections.OrderedDict()
_CACHED_BYTES = [0]  # what ``_cost`` counts of _CACHE
_TIME = re.compile(re.escape(summary_mod.TIME_PREFIX) +
                   r'(0|[1-9][0-9]{0,12}),')


class StaleSummary(ValueError):
    """A summary older than the weigher takes (one line)."""


def summary_of(text: str) -> summary_mod.Summary:
    """``summary.decode``, cached (``SummaryError`` if bad). The cache
    is keyed by the text with its pass time (``summary.encode`` writes
    it first) set to 0, so that a host whose counts did not change stays
    decoded however often its passes ran, and a text ``decode`` refuses
    never matches one it read (a text without the time never starts
    with it); the least recently used is dropped first, beyond
    ``CACHE_LIMIT`` summaries or ``CACHE_BYTES``."""
    stamp = _TIME.match(text) if isinstance(text, str) else None
    key = summary_mod.TIME_PREFIX + '0,' + text[stamp.end():] if stamp \
        else text
    hit = _CACHE.get(key)
    if hit is None:
        s = summary_mod.decode(text)
        cost = _cost(key, s)
        _CACHE[key] = (s, cost)
        _CACHED_BYTES[0] += cost
        while len(_CACHE) > CACHE_LIMIT or _CACHED_BYTES[0] > CACHE_BYTES:
            _CACHED_BYTES[0] -= _CACHE.popitem(last=False)[1][1]
    else:
        s = hit[0]
        _CACHE.move_to_end(key)
    if stamp:
        at = int(stamp.group(1))
        if at >= 1 << 40:
            raise summary_mod.SummaryError('bad time %d' % at)
        s = s._replace(at=at)
    return s


def _cost(key: str, s: summary_mod.Summary) -> int:
    """Bytes counted for one cached summary: its key and, for each
    node, its record and numbers, with the summary's own: at least what
    Python holds (tracemalloc, Python 3.11: 64 nodes in 2.5 KiB of text
    held 17.0 KiB, counted 18.5 KiB; test_weigher holds the bound)."""
    return sys.getsizeof(key) + 1024 + 240 * len(s.nodes)


def clear_cache() -> None:
    """Forget every decoded summary."""
    _CACHE.clear()
    _CACHED_BYTES[0] = 0


class Request(typing.NamedTuple):
    """What the weigher reads of a request."""

    vcpus: int
    memory_kib: int
    uuid: str = ''  # the instance's (``RequestSpec.instance_uuid``)


def request_of(spec: typing.Any) -> typing.Optional[Request]:
    """The requested guest, or None when nova places it itself (an
    instance NUMA topology)."""
    if getattr(spec, 'numa_topology', None):
        return None
    flavor = spec.flavor
    extra = getattr(flavor, 'extra_specs', None) or {}
    for key in NUMA_SPECS:
        value = extra.get(key)
        if key == 'hw:cpu_policy' and value in SHARED_POLICIES:
            continue
        if value not in (None, ''):
            return None
    return Request(int(flavor.vcpus), int(flavor.memory_mb) * 1024,
                   instance_uuid(spec))


def instance_uuid(spec: typing.Any) -> str:
    """The request's instance uuid ('' when not set: nova sets it for
    each instance it schedules; a ``RequestSpec`` without it raises on
    reading, not lazy-loadable)."""
    try:
        return str(spec.instance_uuid or '')
    except Exception:
        return ''


def candidate_of(host_state: typing.Any, request: Request,
                 oldest: typing.Optional[float] = None
                 ) -> typing.Optional[hostchoice.Candidate]:
    """The host as ``hostchoice`` weighs it (its summary, the vCPUs nova
    placed there since, the forecast of the request there), or None when
    it reports no summary. Raises on bad input, and on a summary made
    before ``oldest`` (``StaleSummary``)."""
    stats = getattr(host_state, 'stats', None) or {}
    text = stats.get(summary_mod.KEY)
    if text is None:
        return None
    s = summary_of(text)
    if oldest is not None and s.at < oldest:
        raise StaleSummary('summary of a pass %d s old' % (oldest - s.at))
    # ComputeNode.stats is whatever a nova-compute wrote: a summary may
    # not claim more pool CPUs than nova's own figure for the host
    # (issue 48: huge empty nodes weighed 0.994-1.0 for every flavor).
    total = getattr(host_state, 'vcpus_total', None)
    if isinstance(total, int) and 0 < total < s.pool:
        raise summary_mod.SummaryError(
            'the summary claims %d pool CPUs, nova counts %d'
            % (s.pool, total))
    pending = int(host_state.vcpus_used or 0) - s.seen
    return hostchoice.Candidate(
        str(getattr(host_state, 'host', '')), s, pending,
        summary_mod.forecast(s, request.vcpus, request.memory_kib,
                             pending))


def weigh_hosts(host_states: typing.Sequence[typing.Any], request: Request,
                failed: typing.Optional[dict[str, str]] = None,
                oldest: typing.Optional[float] = None,
                spread_below: float = hostchoice.SPREAD_BELOW
                ) -> list[float]:
    """The raw weights of the candidate hosts for one request, each in
    [-1, 1] (``scores``); a host that cannot be weighed is neutral (and
    in ``failed``: host -> why)."""
    candidates: list[typing.Optional[hostchoice.Candidate]] = []
    for state in host_states:
        try:
            candidates.append(candidate_of(state, request, oldest))
        except Exception as exc:
            if failed is not None:
                failed[str(getattr(state, 'host', '?'))] = '%s: %s' % (
                    type(exc).__name__, exc)
            candidates.append(None)
    return [max(-1.0, min(1.0, w))
            for w in scores(candidates, request, spread_below)]


def scores(candidates: typing.Sequence[typing.Optional[
               hostchoice.Candidate]], request: Request,
           spread_below: float = hostchoice.SPREAD_BELOW) -> list[float]:
    """The raw weight of each candidate (None: ``NEUTRAL``)."""
    return [NEUTRAL if w is None else w for w in hostchoice.weights(
        candidates, request.uuid, spread_below)]


class Complaints:
    """When each host was last logged as not weighed: once a host in
    ``interval`` seconds, at most ``limit`` hosts remembered."""

    def __init__(self, interval: float = COMPLAINT_INTERVAL,
                 limit: int = CACHE_LIMIT) -> None:
        self.interval = interval
        self.limit = limit
        self._at: collections.OrderedDict[str, float] = \
            collections.OrderedDict()

    def due(self, host: str, now: float) -> bool:
        last = self._at.get(host)
        if last is not None and 0 <= now - last < self.interval:
            return False
        self._at[host] = now
        self._at.move_to_end(host)
        if len(self._at) > self.limit:
            self._at.popitem(last=False)
        return True


class OneToOneWeigher(_Base):
    """Weighs hosts by what the package would give the guest there."""

    minval = -1.0
    maxval = 1.0

    def __init__(self) -> None:
        super().__init__()
        self._warned = False
        self._complaints = Complaints()
        self._default = conf_mod.DEFAULT_WEIGHER_MULTIPLIER
        self._max_age = float(conf_mod.DEFAULT_SUMMARY_MAX_AGE)
        self._spread_below = hostchoice.SPREAD_BELOW
        try:
            import nova.conf
            conf = nova.conf.CONF
            conf_mod.register_opts(conf)
            self._default = conf.nova_pinning.weigher_multiplier
            self._max_age = float(conf.nova_pinning.summary_max_age)
            self._spread_below = float(
                conf.nova_pinning.weigher_spread_below)
        except Exception as exc:
            LOG.warning('nova-pinning-hooks: one-to-one weigher: '
                        '[nova_pinning] weigher_multiplier not read (%s); '
                        'multiplier %s', exc, self._default)

    def weight_multiplier(self, host_state: typing.Any) -> float:
        """``weigher_multiplier``, or the host's aggregate's
        ``nova_pinning_weigher_multiplier``."""
        try:
            from nova.scheduler import utils
            return float(utils.get_weight_multiplier(
                host_state, AGGREGATE_KEY, self._default))
        except Exception as exc:
            if not self._warned:
                LOG.warning('nova-pinning-hooks: one-to-one weigher: '
                            'aggregate multipliers not read (%s: %s); '
                            'multiplier %s', type(exc).__name__, exc,
                            self._default)
                self._warned = True
            return float(self._default)

    def _weigh_object(self, host_state: typing.Any,
                      weight_properties: typing.Any) -> float:
        return self.weigh_objects(
            [_Weighed(host_state)], weight_properties)[0]

    def weigh_objects(self, weighed_obj_list: typing.Sequence[typing.Any],
                      weight_properties: typing.Any) -> list[float]:
        """One weight per host; never raises."""
        try:
            request = request_of(weight_properties)
        except Exception as exc:
            LOG.warning('nova-pinning-hooks: one-to-one weigher: the '
                        'request cannot be read (%s: %s): neutral weights',
                        type(exc).__name__, exc)
            request = None
        if request is None:
            return [NEUTRAL] * len(weighed_obj_list)
        failed: dict[str, str] = {}
        now = time.time()
        weights = weigh_hosts([obj.obj for obj in weighed_obj_list],
                              request, failed,
                              now - self._max_age - AGE_SLACK,
                              self._spread_below)
        due = [(host, why) for host, why in failed.items()
               if self._complaints.due(host, now)]
        if due:
            LOG.warning('nova-pinning-hooks: one-to-one weigher: neutral '
                        'weight for %d host(s) (each logged once in %d s): '
                        '%s', len(due), COMPLAINT_INTERVAL, '; '.join(
                            '%s (%s)' % d for d in due[:3]))
        return weights


class _Weighed(typing.NamedTuple):
    obj: typing.Any
