"""The pass statistics of one process: counters of its passes and polls.

``PassStats`` counts what each pass did (``record``: a
``reconciler.PassResult``) and each vCPU count poll (``record_poll``);
``metrics`` renders them (``nova_pinning_passes_total`` and the rest).

Invariants:

* thread-safe: every change and every reading (``metrics``) holds the
  lock;
* every outcome and every (result, kind) of pin changes is counted from
  the start, at zero (``OUTCOMES``, ``CHANGE_RESULTS``, ``CHANGE_KINDS``:
  the series ``metrics`` serves). A new ``plan.ChangeKind`` is a
  series of its own without an edit here; so is every result of a move
  of an arrived guest's memory home (``MOVE_RESULTS``), whose libvirt
  calls count with the passes' (``record_memory_home``).
"""

import threading
import time
import typing

from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.host import memhome
from nova_pinning_hooks.passes import reconciler

OUTCOMES = ('ok', 'failed', 'refused')
# Every (result, kind) of pin_changes_total is served from the start, at
# zero: a panel or an alert over a series that appears only after the
# first change would say "No data" on a quiet host.
CHANGE_RESULTS = ('applied', 'skipped')
CHANGE_KINDS = tuple(kind.value for kind in plan_mod.ChangeKind)
MOVE_RESULTS = tuple(result.value for result in memhome.Result)


class PassStats:
    """Counters of the passes of one process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.passes = dict.fromkeys(OUTCOMES, 0)
        self.seconds_sum = 0.0
        self.changes = {(result, kind): 0
                        for result in CHANGE_RESULTS
                        for kind in CHANGE_KINDS}
        self.calls = {'read': 0, 'write': 0}
        self.polls = 0  # vCPU count polls (runtime.service)
        # moves of arrived guests' memory home, by result (passes.memhome)
        self.memory_home = dict.fromkeys(MOVE_RESULTS, 0)
        self.last_timestamp: typing.Optional[float] = None
        self.last_ok: typing.Optional[bool] = None
        # of the last pass that planned
        self.last_plan: typing.Optional[plan_mod.Plan] = None

    def record(self, result: reconciler.PassResult,
               now: typing.Optional[float] = None) -> None:
        """Count a ``reconciler.PassResult``."""
        outcome = ('ok' if result.error is None else 'refused'
                   if result.error_kind == reconciler.ErrorKind.INPUT
                   else 'failed')
        with self._lock:
            self.passes[outcome] += 1
            self.seconds_sum += result.seconds
            skipped = {id(c) for c, _ in result.skipped
                       if not isinstance(c, str)}
            for c in result.applied:
                key = ('applied', c.kind)
                self.changes[key] = self.changes.get(key, 0) + 1
            for c in result.changes:
                if id(c) in skipped:
                    key = ('skipped', c.kind)
                    self.changes[key] = self.changes.get(key, 0) + 1
            for kind in self.calls:
                self.calls[kind] += result.calls.get(kind, 0)
            self.last_timestamp = time.time() if now is None else now
            self.last_ok = result.complete
            if result.plan is not None:
                self.last_plan = result.plan

    def record_poll(self, calls: typing.Mapping[str, int]) -> None:
        """Count a vCPU count poll and its libvirt calls (``{'read':
        n}``): a poll that finds nothing runs no pass, but its calls
        are the agent's steady cost, and are counted with the passes'."""
        with self._lock:
            self.polls += 1
            for kind in self.calls:
                self.calls[kind] += calls.get(kind, 0)

    def record_memory_home(self, result: typing.Optional[str],
                           calls: typing.Mapping[str, int]) -> None:
        """Count a move of an arrived guest's memory home (``result``,
        ``host.memhome.Result``; None: a widening alone, no move) and
        its libvirt calls, with the passes'."""
        with self._lock:
            if result is not None:
                self.memory_home[result] = \
                    self.memory_home.get(result, 0) + 1
            for kind in self.calls:
                self.calls[kind] += calls.get(kind, 0)
