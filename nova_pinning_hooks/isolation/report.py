"""``status``: what isolation looks like on this host, as a plain dict.

Read-only and never raises: ``nova-pinning status`` prints it beside the
binding state. Keys (absent when unknown):

* ``state``: 'applied' (a state file records changes), 'not applied'
  (with ``earlier_boot`` true when a state file is left from before the
  last reboot, which undid it),
  'not configured' (the configuration is refused: ``why``), 'unknown'
  (``error``);
* ``mode``, ``reserved_cpus``: from the configuration;
* ``applied_mode``, ``applied_cpus``, ``recorded_processes``: from the
  state file;
* cgroup v1: ``group``, ``group_exists``, ``group_cpus``, ``confined``
  (processes in the host group), ``not_confined`` (processes that would
  be moved but are not in it, e.g. started since the last sweep),
  ``kept`` (``{reason: count}`` of processes never moved);
* systemd: ``slices`` (``{unit: {AllowedCPUs, EffectiveCPUs, ...}}``,
  with machine.slice), ``confined`` / ``not_confined`` (units whose
  EffectiveCPUs are / are not the reserved CPUs);
* kernel work (``kernelwork.status``): ``one_to_one_cpus`` (in force, from
  the vCPU threads), ``irqs_on_one_to_one`` (interrupts whose affinity
  still holds one of them), ``irqs_moved`` / ``irqs_refused`` (from the
  state file), ``irqs_firing_on_one_to_one`` (``{irq: interrupts
  delivered on one-to-one CPUs}`` between two readings of
  /proc/interrupts ``irq_sample_seconds`` apart), ``workqueue_cpus``,
  ``irqbalance`` (``{pid, told}`` when it runs).
"""

import collections
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.isolation import BackendError
from nova_pinning_hooks.isolation import backends
from nova_pinning_hooks.isolation import classify
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import kernelwork
from nova_pinning_hooks.isolation import state

LOG = logging.getLogger(__name__)


def _recorded(path: str, proc: str) -> dict[str, typing.Any]:
    try:
        st = state.load(path)
    except state.StateError as exc:
        return {'state': 'unknown', 'error': str(exc)}
    if st is None:
        return {'state': 'not applied'}
    if state.from_earlier_boot(st, proc):
        return {'state': 'not applied', 'earlier_boot': True}
    return {'state': 'applied', 'applied_mode': st['mode'],
            'applied_cpus': st.get('cpus'),
            'recorded_processes': len(st['moved'])}


def _processes(settings: config.Settings) -> dict[str, typing.Any]:
    counts: collections.Counter[str] = collections.Counter()
    for _, verdict, _ in classify.scan(settings.rules, settings.paths.proc):
        counts[verdict] += 1
    kept = {k: v for k, v in counts.items()
            if k not in (classify.CONFINED, classify.MOVABLE)}
    return {'confined': counts[classify.CONFINED],
            'not_confined': counts[classify.MOVABLE], 'kept': kept}


def _status(conf: typing.Any, paths: config.HostPaths,
            nova_sets: typing.Optional[tuple[typing.Optional[str],
                                             typing.Optional[str]]]
            ) -> dict[str, typing.Any]:
    result = _recorded(conf.nova_pinning_isolation.state_file, paths.proc)
    try:
        settings = config.load(conf, paths, nova_sets)
    except config.ConfigError as exc:
        if result['state'] == 'not applied':
            result['state'] = 'not configured'
        result['why'] = str(exc)
        return result
    result.update(mode=settings.mode,
                  reserved_cpus=cpuset.format(settings.cpus))
    backend = backends.backend_for(settings)
    try:
        result.update(backend.status())
    except (BackendError, OSError) as exc:
        result['backend_error'] = str(exc)
    if settings.mode == 'v1':
        result.update(_processes(settings))
    result.update(_pins(conf, settings))
    return result


def _pins(conf: typing.Any,
          settings: config.Settings) -> dict[str, typing.Any]:
    try:
        st = state.load(settings.state_file)
        if st is not None and state.from_earlier_boot(st,
                                                      settings.paths.proc):
            st = None
    except state.StateError:
        st = None
    try:
        return kernelwork.status(
            settings, st,
            conf.nova_pinning_isolation.interrupt_sample_seconds)
    except OSError as exc:
        return {'pins_error': str(exc)}


def status(conf: typing.Any, paths: config.HostPaths = config.HOST,
           nova_sets: typing.Optional[tuple[typing.Optional[str],
                                            typing.Optional[str]]] = None
           ) -> dict[str, typing.Any]:
    """The isolation state (see the module doc); never raises.
    ``nova_sets``: as ``config.load``'s."""
    try:
        return _status(conf, paths, nova_sets)
    except Exception as exc:  # a status line must not break the caller
        LOG.exception('isolation: status failed')
        return {'state': 'unknown', 'error': '%s: %s'
                % (type(exc).__name__, exc)}
