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
``HostState.consume_from_request``), and weighs what the host's next
pass would give the guest (``summary.forecast`` and ``summary.score``):
one-to-one, the fuller its node the better; no change for anybody;
guests losing their one-to-one binding, the more the worse.

Invariants:

* nothing remote and nothing that blocks: it reads the ``HostState``
  objects and the ``RequestSpec`` it is handed; each summary text is
  decoded once (a bounded cache);
* never raises into the scheduler: a host it cannot weigh gets the
  neutral weight 0, with one log line for the request;
* neutral (0 for every host) for guests nova places itself, those with
  an instance NUMA topology (``RequestSpec.numa_topology``, from
  ``hw:numa_nodes``, ``hw:cpu_policy`` dedicated or mixed, ``PCPU``
  resources or the same image properties), and for a host that reports
  no summary (no package there, or a summary too old);
* fixed bounds: ``minval`` -1 and ``maxval`` 1, so nova's normalisation
  maps every weight to the same place whatever the other hosts weigh
  (0.5 neutral; one-to-one 0.8 to 1; a loss 0 to 0.4): with a
  multiplier of 7 or more, a host where the guest is one-to-one
  outweighs any other whatever nova's RAM and CPU weighers (at their
  default multipliers, 1.0) say;
* its multiplier is ``[nova_pinning] weigher_multiplier``, overridden
  per aggregate by the metadata key ``nova_pinning_weigher_multiplier``
  (``nova.scheduler.utils.get_weight_multiplier``, as nova's own);
* importable without nova (the base class is then ``object``): only
  nova-scheduler loads it, by class path.
"""

import typing

from oslo_log import log as logging

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import summary as summary_mod

try:
    from nova.scheduler import weights as _nova_weights
    _Base: typing.Any = _nova_weights.BaseHostWeigher
except ImportError:  # no nova here: the class is only for nova-scheduler
    _Base = object

LOG = logging.getLogger(__name__)
AGGREGATE_KEY = 'nova_pinning_weigher_multiplier'
NEUTRAL = 0.0
CACHE_LIMIT = 4096  # summary texts kept decoded
# Flavor extra specs of guests nova places itself (each also gives the
# request a NUMA topology; checked in case the request lacks it).
NUMA_SPECS = ('hw:numa_nodes', 'hw:cpu_policy', 'resources:PCPU',
              'hw:cpu_dedicated_mask')
SHARED_POLICIES = (None, '', 'shared')

_CACHE: dict[str, summary_mod.Summary] = {}


def summary_of(text: str) -> summary_mod.Summary:
    """``summary.decode``, once per text (``SummaryError`` if bad)."""
    s = _CACHE.get(text)
    if s is None:
        if len(_CACHE) >= CACHE_LIMIT:
            _CACHE.clear()
        s = _CACHE[text] = summary_mod.decode(text)
    return s


def request_of(spec: typing.Any) -> typing.Optional[tuple[int, int]]:
    """(vCPUs, memory KiB) of the requested guest, or None when nova
    places it itself (an instance NUMA topology)."""
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
    return int(flavor.vcpus), int(flavor.memory_mb) * 1024


def weigh(host_state: typing.Any, request: tuple[int, int]) -> float:
    """The raw weight of one host for one request, in [-1, 1]; the
    neutral weight when it reports no summary. Raises on bad input."""
    stats = getattr(host_state, 'stats', None) or {}
    text = stats.get(summary_mod.KEY)
    if text is None:
        return NEUTRAL
    s = summary_of(text)
    # ComputeNode.stats is whatever a nova-compute wrote: a summary may
    # not claim more pool CPUs than nova's own figure for the host
    # (issue 48: huge empty nodes weighed 0.994-1.0 for every flavor).
    total = getattr(host_state, 'vcpus_total', None)
    if isinstance(total, int) and 0 < total < s.pool:
        raise summary_mod.SummaryError(
            'the summary claims %d pool CPUs, nova counts %d'
            % (s.pool, total))
    vcpus, kib = request
    pending = int(host_state.vcpus_used or 0) - s.seen
    return summary_mod.score(summary_mod.forecast(s, vcpus, kib, pending))


class OneToOneWeigher(_Base):
    """Weighs hosts by what the package would give the guest there."""

    minval = -1.0
    maxval = 1.0

    def __init__(self) -> None:
        super().__init__()
        self._warned = False
        self._default = conf_mod.DEFAULT_WEIGHER_MULTIPLIER
        try:
            import nova.conf
            conf = nova.conf.CONF
            conf_mod.register_opts(conf)
            self._default = conf.nova_pinning.weigher_multiplier
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
        weights, failed = [], []
        for obj in weighed_obj_list:
            try:
                w = weigh(obj.obj, request)
            except Exception as exc:
                failed.append('%s (%s: %s)' % (getattr(
                    obj.obj, 'host', '?'), type(exc).__name__, exc))
                w = NEUTRAL
            weights.append(max(self.minval, min(self.maxval, w)))
        if failed:
            LOG.warning('nova-pinning-hooks: one-to-one weigher: neutral '
                        'weight for %d host(s): %s', len(failed),
                        '; '.join(failed[:3]))
        return weights


class _Weighed(typing.NamedTuple):
    obj: typing.Any
