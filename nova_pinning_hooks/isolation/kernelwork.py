"""Kernel work that follows the pin map: interrupts, unbound workqueues
and irqbalance, kept off the one-to-one CPUs (``pinmap``).

``follow(settings, st)`` runs at ``apply`` and at every sweep of the
agent; ``restore(st, paths)`` at ``undo``; ``status(settings, st)`` for
``status`` and the metrics. The parts of the isolation state they keep
are ``interrupts``, ``workqueue`` and ``irqbalance`` (see those
modules).

Invariants:

* the one-to-one CPUs are read once per sweep, and nothing is written
  when they and the kernel's sets did not change;
* the state is saved before every change (write-ahead, by each part)
  and only when its content changed, not every sweep;
* ``follow`` never raises: a part that fails is one log line, and the
  other parts and the agent go on;
* ``restore`` restores every part it can and returns what it could not
  (the state keeps those, so ``undo`` can be run again).
"""

import json
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation import statusfile
from nova_pinning_hooks.isolation.kernel import interrupts
from nova_pinning_hooks.isolation.kernel import irqbalance
from nova_pinning_hooks.isolation.kernel import pinmap
from nova_pinning_hooks.isolation.kernel import workqueue

LOG = logging.getLogger(__name__)
KEEP_READING = 600.0  # seconds a previous reading of counts stays usable


class _Saver:
    """Saves the state when its content changed since the last save."""

    def __init__(self, path: str, st: state.State) -> None:
        self.path, self.st = path, st
        self.last = json.dumps(st, sort_keys=True)

    def __call__(self) -> None:
        now = json.dumps(self.st, sort_keys=True)
        if now != self.last:
            state.save(self.path, self.st)
            self.last = now


def follow(settings: config.Settings,
           st: typing.Optional[state.State]) -> None:
    """Keep interrupts, workqueues and irqbalance off the one-to-one
    CPUs in force. Never raises."""
    if st is None or not (settings.interrupts or settings.workqueues):
        return
    paths = settings.paths
    save = _Saver(settings.state_file, st)
    try:
        one_to_one = pinmap.read(paths.qemu_run, paths.proc)
        online = config.online_cpus(paths)
    except (OSError, config.ConfigError) as exc:
        LOG.error('isolation: cannot read the one-to-one CPUs: %s', exc)
        return
    text = cpuset.format(one_to_one)
    if st.get('one_to_one') != text:
        LOG.info('isolation: one-to-one CPUs now %s', text or '(none)')
        st['one_to_one'] = text
    steps: list[tuple[str, typing.Callable[[], object]]] = []
    if settings.interrupts:
        steps.append(('irqbalance', lambda: irqbalance.follow(
            st.setdefault('irqbalance', {}), one_to_one, paths.proc,
            paths.irqbalance_run, save)))
        steps.append(('interrupts', lambda: interrupts.follow(
            st.setdefault('interrupts', {}), one_to_one, online,
            paths.proc, save)))
    if settings.workqueues:
        steps.append(('workqueue', lambda: workqueue.follow(
            st.setdefault('workqueue', {}), one_to_one, online,
            paths.workqueue_mask, save)))
    for name, step in steps:
        try:
            step()
        except Exception as exc:  # one part's failure stops no other
            LOG.error('isolation: %s: %s: %s', name, type(exc).__name__,
                      exc)
    try:
        save()
    except OSError as exc:
        LOG.error('isolation: cannot save the state: %s', exc)


def restore(st: state.State, paths: config.HostPaths) -> list[str]:
    """Undo every part; the failures (a list of messages). A part
    restored whole leaves the state."""
    failures: list[str] = []

    def undo(name: str, record: typing.Optional[typing.Mapping[str, object]],
             step: typing.Callable[[], list[str]]) -> bool:
        """Whether the part is all undone (nothing left to record)."""
        if not record:
            return False
        try:
            failures.extend(step())
        except Exception as exc:
            LOG.exception('isolation: undo of %s failed', name)
            failures.append('%s: %s: %s' % (name, type(exc).__name__, exc))
        return not record

    ib, irq, wq = st.get('irqbalance'), st.get('interrupts'), \
        st.get('workqueue')
    if ib is not None and undo('irqbalance', ib, lambda: irqbalance.restore(
            ib, paths.proc, paths.irqbalance_run)):
        del st['irqbalance']
    if irq is not None and undo('interrupts', irq, lambda: interrupts.restore(
            irq, paths.proc)):
        del st['interrupts']
    if wq is not None and undo('workqueue', wq, lambda: workqueue.restore(
            wq, paths.workqueue_mask)):
        del st['workqueue']
    return failures


# a reading of /proc/interrupts kept by long-lived readers:
# {proc: (monotonic time, interrupts.counts(proc))}
_LAST: dict[str, tuple[float, dict[int, dict[int, int]]]] = {}
_sleep = time.sleep  # tests replace it


def _sample(proc: str, seconds: float,
            clock: typing.Callable[[], float] = time.monotonic,
            wait: bool = True
            ) -> typing.Optional[tuple[dict[int, dict[int, int]],
                                       dict[int, dict[int, int]], float]]:
    """Two readings of the counts: the previous one this process made
    (if recent) or one ``seconds`` ago, and now. (before, after,
    seconds between) or None. Without ``wait`` (the agent, at each
    sweep) there is no second reading to wait for: the first call keeps
    one for the next and returns None."""
    last = _LAST.get(proc)
    now = clock()
    if last is not None and 0.05 < now - last[0] < KEEP_READING:
        before, then = last[1], last[0]
    else:
        if not seconds:
            return None
        if not wait:
            _LAST[proc] = (now, interrupts.counts(proc))
            return None
        before, then = interrupts.counts(proc), now
        _sleep(seconds)
    after = interrupts.counts(proc)
    now = clock()
    _LAST[proc] = (now, after)
    return before, after, now - then


def status(settings: config.Settings,
           st: typing.Optional[state.State],
           sample_seconds: float, wait: bool = True
           ) -> statusfile.Status:
    """What ``status`` shows of these parts (``statusfile.Status``);
    ``wait``: as ``_sample``'s."""
    paths = settings.paths
    one_to_one = pinmap.read(paths.qemu_run, paths.proc)
    result: statusfile.Status = {
        'one_to_one_cpus': cpuset.format(one_to_one),
        'interrupts_enabled': settings.interrupts,
        'workqueues_enabled': settings.workqueues}
    st = st or {}
    on = [n for n in interrupts.numbers(paths.proc)
          if (interrupts.affinity(n, paths.proc) or frozenset()) &
          one_to_one]
    result['irqs_on_one_to_one'] = len(on)
    result['irqs_moved'] = len(st.get('interrupts', {}).get('moved', {}))
    result['irqs_refused'] = len(st.get('interrupts', {}).get('refused',
                                                             {}))
    sample = _sample(paths.proc, sample_seconds, wait=wait)
    if sample is not None:
        before, after, seconds = sample
        firing = interrupts.firing_on(before, after, one_to_one)
        result['irqs_firing_on_one_to_one'] = {
            str(k): v for k, v in sorted(firing.items())}
        result['irq_sample_seconds'] = round(seconds, 3)
    mask = workqueue.read(paths.workqueue_mask)
    if mask is not None:
        result['workqueue_cpus'] = cpuset.format(mask)
    p = irqbalance.find(paths.proc)
    told = st.get('irqbalance', {})
    if p is not None:
        result['irqbalance'] = {
            'pid': p.pid, 'told': told.get('told') if (
                told.get('pid'), told.get('start')) == (p.pid, p.start)
            else None}
    return result
