"""``status``: what isolation looks like on this host, as a plain dict
(``statusfile.Status``).

Read-only and never raises. Three ways to it:

* ``status(options)``, live, for ``nova-pinning-isolate status``: asks the
  backend (systemd, or cgroupfs) now, each unit within
  ``[nova_pinning_isolation] status_timeout``: once systemd did not
  answer for one in time, no unit after it is asked (so a hung systemd
  costs one bound, a slow one that answers is heard out);
* ``agent_status(...)``, the same from the agent's own settings and
  backend, which it publishes after every sweep (``statusfile``);
* ``published(options)``: what the agent published, for every other reader
  (the metrics, nova-compute, ``nova-pinning status``): one small file,
  never systemd, with ``status_written``, ``status_age``,
  ``status_stale`` and ``status_sweep_interval`` (``statusfile.read``).

Its keys (absent when unknown) are ``statusfile.Status``'s, each
described there.
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
from nova_pinning_hooks.isolation import statusfile

LOG = logging.getLogger(__name__)


def _recorded(path: str, proc: str) -> statusfile.Status:
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


def _processes(settings: config.Settings) -> statusfile.Status:
    counts: collections.Counter[str] = collections.Counter()
    for _, verdict, _ in classify.scan(settings.rules, settings.paths.proc):
        counts[verdict] += 1
    kept = {k: v for k, v in counts.items()
            if k not in (classify.CONFINED, classify.MOVABLE)}
    return {'confined': counts[classify.CONFINED],
            'not_confined': counts[classify.MOVABLE], 'kept': kept}


def _live(options: config.Options, settings: config.Settings,
          backend: backends.Backend, timeout: typing.Optional[float],
          wait: bool = True) -> statusfile.Status:
    result: statusfile.Status = {
        'mode': settings.mode, 'reserved_cpus': cpuset.format(settings.cpus)}
    try:
        result.update(backend.status(timeout))
    except (BackendError, OSError) as exc:
        result['backend_error'] = str(exc)
    if settings.mode == state.CgroupMode.V1:
        result.update(_processes(settings))
    result.update(_pins(options, settings, wait))
    return result


def _status(options: config.Options, paths: config.HostPaths,
            nova_sets: typing.Optional[config.NovaSets],
            timeout: typing.Optional[float]) -> statusfile.Status:
    result = _recorded(options.state_file, paths.proc)
    try:
        settings = config.load(options, paths, nova_sets)
    except config.ConfigError as exc:
        if result['state'] == 'not applied':
            result['state'] = 'not configured'
        result['why'] = str(exc)
        return result
    result.update(_live(options, settings, backends.backend_for(settings),
                        timeout))
    return result


def _pins(options: config.Options, settings: config.Settings,
          wait: bool = True) -> statusfile.Status:
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
            options.interrupt_sample_seconds, wait)
    except OSError as exc:
        return {'pins_error': str(exc)}


def status(options: config.Options, paths: config.HostPaths = config.HOST,
           nova_sets: typing.Optional[config.NovaSets] = None,
           timeout: typing.Optional[float] = None) -> statusfile.Status:
    """The isolation state, asked of the backend now (see the module
    doc); never raises. ``nova_sets``: as ``config.load``'s. systemd is
    given ``timeout`` seconds a unit (default ``[nova_pinning_isolation]
    status_timeout``)."""
    if timeout is None:
        timeout = options.status_timeout
    try:
        return _status(options, paths, nova_sets, timeout)
    except Exception as exc:  # a status line must not break the caller
        LOG.exception('isolation: status failed')
        return {'state': 'unknown', 'error': '%s: %s'
                % (type(exc).__name__, exc)}


def agent_status(options: config.Options, settings: config.Settings,
                 backend: backends.Backend) -> statusfile.Status:
    """``status`` as the agent sees it, through its own backend (one
    connection to systemd), for ``statusfile.write``; never raises."""
    try:
        result = _recorded(settings.state_file, settings.paths.proc)
        # No wait for a second reading of /proc/interrupts: each sweep
        # counts since the one before.
        result.update(_live(options, settings, backend,
                            options.status_timeout, wait=False))
        return result
    except Exception as exc:
        LOG.exception('isolation: status failed')
        return {'state': 'unknown', 'error': '%s: %s'
                % (type(exc).__name__, exc)}


def published(options: config.Options,
              paths: config.HostPaths = config.HOST) -> statusfile.Status:
    """What the agent published after its last sweep
    (``published_in``, from ``[nova_pinning_isolation] state_file``).
    Never raises."""
    return published_in(options.state_file, paths)


def published_in(state_file: str,
                 paths: config.HostPaths = config.HOST
                 ) -> statusfile.Status:
    """What the agent published after its last sweep in ``state_file``
    (``statusfile.read``): one small file, never systemd. Never
    raises."""
    try:
        return statusfile.read(state_file, paths.proc)
    except Exception as exc:  # a status line must not break the caller
        LOG.exception('isolation: reading the published status failed')
        return {'state': 'unknown', 'status_written': 0,
                'status_stale': True,
                'error': '%s: %s' % (type(exc).__name__, exc)}
