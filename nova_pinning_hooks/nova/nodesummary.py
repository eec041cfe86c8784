"""The host's plan, summed up for nova's scheduler, in its compute node's
stats.

nova's scheduler sees each compute node's ``stats`` as
``HostState.stats``: the dict nova's resource tracker keeps for the node
(``ResourceTracker.stats[nodename]``, a ``nova.compute.stats.Stats``),
filled at each periodic audit from what the virt driver's
``get_available_resource`` returns under ``'stats'`` and saved with the
``ComputeNode`` (``doc/source/reference/nova-integration.rst``, "Across the
cloud", names the
lines in nova 29 to 34). The audit runs every minute; between two, every
claim, abort and usage update of an instance ends in
``ResourceTracker._update``, which saves the node when it changed. That
is where the package adds its key, ``summary.KEY``: a pre-hook on
``_update`` (``install``), so that the scheduler's view follows the host
at every claim and deletion, not once a minute.

What is reported (``Reporter``): the summary of the last pass that
planned (``passrunner.PassRunner.basis``: the pass thread's, or under eventlet
the pass worker's file), less the guests nova's resource tracker no
longer counts on this host (deleted or moved away before the next pass
saw them go: ``summary.report``). The guests it counts that no pass saw
yet are the scheduler's to add (``vcpus_used`` above the summary's
``seen``).

Invariants:

* nothing remote and nothing slow under nova's lock (``_update`` runs
  under ``COMPUTE_RESOURCE_SEMAPHORE``): no libvirt call; in memory, or
  one bounded read of a small regular file, parsed again only when it
  changed;
* bounded: one key, at most ``summary.MAX_TEXT`` characters;
* never raises into nova's resource tracker: any failure, a summary older
  than ``[nova_pinning] summary_max_age``, or none yet, leaves the key
  out (removed if an earlier update set it), with one log line per
  reason until it is reported again;
* only the key is touched; the node's ``stats`` are assigned back to it
  (the same object) so that nova saves them with the node.
"""

import inspect
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.nova import hookpoints

LOG = logging.getLogger(__name__)
KEY = summary_mod.KEY
METHOD = '_update'
PARAMETERS = ['context', 'compute_node']


def install(tracker_cls: type, hook_name: str) -> bool:
    """The pre-hook on ``tracker_cls._update``; False (logged) when this
    nova's resource tracker lacks it in the shape read."""
    method = getattr(tracker_cls, METHOD, None)
    try:
        params = list(inspect.signature(method).parameters) \
            if callable(method) else []
    except (TypeError, ValueError):
        params = []
    if params[1:3] != PARAMETERS:
        LOG.warning('nova-pinning-hooks: %s.%s(self, %s, ...) not found: '
                    'no summary reported to nova\'s scheduler',
                    tracker_cls.__name__, METHOD, ', '.join(PARAMETERS))
        return False
    hookpoints.install(tracker_cls, [METHOD], hook_name)
    return True


class Reporter:
    """Sets ``KEY`` in a compute node's stats from ``source`` (a callable
    returning the last pass's ``summary.Basis``, or None)."""

    def __init__(self, source: typing.Callable[
                     [], typing.Optional[summary_mod.Basis]],
                 max_age: float,
                 clock: typing.Callable[[], float] = time.time) -> None:
        self.source = source
        self.max_age = max_age
        self.clock = clock
        self._why: typing.Optional[str] = None  # the last reason logged

    def text(self, tracked: typing.Optional[typing.Collection[str]]
             ) -> tuple[typing.Optional[str], typing.Optional[str]]:
        """(stats value, None) or (None, why not)."""
        b = self.source()
        if b is None:
            return None, 'no pass has planned yet'
        if self.clock() - b.summary.at > self.max_age:
            return None, ('the last pass that planned is older than '
                          'summary_max_age (%d s)' % self.max_age)
        text = summary_mod.encode(summary_mod.report(b, tracked))
        if text is None:
            return None, 'the host is beyond the summary\'s bounds'
        return text, None

    def update(self, compute_node: typing.Any,
               tracked: typing.Optional[typing.Collection[str]]
               ) -> typing.Optional[str]:
        """Set (or take out) the key in ``compute_node.stats``; returns
        the value set. Never raises."""
        try:
            text, why = self.text(tracked)
        except Exception as exc:
            text, why = None, '%s: %s' % (type(exc).__name__, exc)
        try:
            is_set = getattr(compute_node, 'obj_attr_is_set', None)
            if is_set is not None and not is_set('stats'):
                return None  # nova has not filled them yet
            stats = compute_node.stats
            if not isinstance(stats, dict):
                return None
            if text is None:
                if stats.pop(KEY, None) is not None:
                    compute_node.stats = stats
            elif stats.get(KEY) != text:
                stats[KEY] = text
                compute_node.stats = stats  # saved with the node
        except Exception as exc:
            text, why = None, '%s: %s' % (type(exc).__name__, exc)
        if why != self._why:
            if why is None:
                LOG.info('nova-pinning-hooks: reporting the plan\'s '
                         'summary to nova\'s scheduler (stats %s)', KEY)
            else:
                LOG.warning('nova-pinning-hooks: no summary for nova\'s '
                            'scheduler: %s', why)
            self._why = why
        return text
