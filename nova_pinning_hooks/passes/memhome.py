"""The memory-home thread: arrived guests' memory moved to their home
node after the copy, one guest at a time, beside the passes.

A pass homes an arrived guest (migrated in, restored: home source
``arrived``, ``policy.homes``) and binds it there; its pages stay where
qemu's incoming copy put them. Each pass hands its result to
``MemoryHome.after_pass``, which notes the guests so homed whose memory
still lies partly off their home node; the thread moves them home
(``host.memhome.move``).

Invariants:

* ``after_pass`` never blocks and never raises: no I/O, a lock held for
  microseconds; what it notes replaces what the last pass noted (a
  guest no longer named, gone or home now, is dropped); a guest whose
  memory mode libvirt cannot change live (interleave, preferred) is
  never noted, nor is a guest the pass could not bind (its pin changes
  skipped: a job of libvirt's holds it, above all the incoming
  migration itself until its end): a move then waits behind that job
  (libvirt queues the nodeset write, and fails it after 30 s), and
  the pass that binds it, on the job's end, notes it;
* moves run on this module's own thread and its own libvirt connection,
  never on nova's threads, never under the pass lock: a move holds up
  no pass (of another guest or its own: a pass reads no job of libvirt's
  and writes no pin of a guest whose plan did not change);
* one move at a time; a guest is moved again no sooner than
  ``RETRY_SECONDS`` after its last attempt, whatever its outcome (a
  guest moved home is a memory home at the next pass, which drops it);
* a home nodeset a move could not widen again is widened before any
  other move, on every wake of the thread;
* what each move did is counted (``counts``, by ``host.memhome.Result``)
  and its libvirt calls with the passes' (``record``: a
  ``passstats.PassStats``' ``record_memory_home``);
* ``stop`` ends the thread within the running move's own time bound.
"""

import collections
import threading
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.host import memhome as memhome_host
from nova_pinning_hooks.passes import reconciler

LOG = logging.getLogger(__name__)

RETRY_SECONDS = 300.0
# The memory modes whose nodeset libvirt changes live: restrictive (what
# a move writes), or none yet; a strict, interleave or preferred guest
# is left where it is.
MOVABLE_MODES = (None, 'restrictive')
IDLE_WAIT = 60.0  # seconds the thread sleeps with nothing due


class Candidate(typing.NamedTuple):
    """An arrived guest homed by a pass, memory partly elsewhere."""
    uuid: str
    name: str
    home: int
    away_kib: int  # its memory off the home node, as the pass read it
    every_node: frozenset[int]  # what its nodeset is widened to after


def candidates(result: reconciler.PassResult
               ) -> typing.Optional[list[Candidate]]:
    """The guests a pass homed as arrivals whose memory lies partly off
    their home node; None when the pass tells nothing (no plan, a dry
    run, a release)."""
    plan, snap = result.plan, result.snapshot
    if plan is None or snap is None or result.dry_run or result.release:
        return None
    guests = {g.uuid: g for g in snap.guests}
    every = frozenset(snap.host.nodes)
    # Not bound by this pass (a PinChange skipped, or a guest's name).
    unbound = {c.uuid if isinstance(c, plan_mod.PinChange) else c
               for c, _ in result.skipped}
    found = []
    for gp in plan.guests:
        if gp.home_source != plan_mod.HomeSource.ARRIVED or \
                gp.home_node is None or gp.mode == plan_mod.UNTOUCHED or \
                gp.uuid in unbound or gp.name in unbound:
            continue
        guest = guests[gp.uuid]
        if guest.numa_mode not in MOVABLE_MODES:
            continue  # libvirt would refuse the nodeset
        memory = guest.memory_by_node_kib
        away = sum(memory.values()) - memory.get(gp.home_node, 0)
        if away > 0:
            found.append(Candidate(gp.uuid, gp.name, gp.home_node, away,
                                   every))
    return found


class Recorder(typing.Protocol):
    def record_memory_home(self, result: typing.Optional[str],
                           calls: typing.Mapping[str, int]) -> None: ...


class MemoryHome:
    """The thread and what it has to do. ``connect()``: a libvirt
    adapter of its own (a ``virt.Host``), opened on first need."""

    def __init__(self, connect: typing.Callable[[], typing.Any],
                 record: typing.Optional[Recorder] = None,
                 retry: float = RETRY_SECONDS,
                 clock: typing.Callable[[], float] = time.monotonic,
                 move: typing.Callable[..., memhome_host.Outcome] =
                 memhome_host.move,
                 widen: typing.Callable[..., memhome_host.Outcome] =
                 memhome_host.widen) -> None:
        self._connect = connect
        self._record = record
        self._retry = retry
        self._clock = clock
        self._move = move
        self._widen = widen
        self._lock = threading.Lock()
        self._todo: dict[str, Candidate] = {}
        self._not_before: dict[str, float] = {}
        self._unwidened: dict[str, frozenset[int]] = {}
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: typing.Optional[threading.Thread] = None
        self._host: typing.Any = None
        self.counts: collections.Counter[str] = collections.Counter()
        # (guest name, outcome) of the last attempt
        self.last: typing.Optional[tuple[str, memhome_host.Outcome]] = None

    # -- what passes hand in (the pass thread) ---------------------------

    def after_pass(self, result: reconciler.PassResult) -> None:
        """Note the arrivals of a pass's plan; never blocks or raises."""
        try:
            found = candidates(result)
        except Exception:  # a defect here must not fail the pass thread
            LOG.exception('memory home: pass result not read')
            return
        if found is None:
            return
        with self._lock:
            self._todo = {c.uuid: c for c in found}
            for uuid in list(self._not_before):
                if uuid not in self._todo:
                    del self._not_before[uuid]
        if found:
            self._wake.set()

    # -- the thread -------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='nova-pinning-memory-home')
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        host, self._host = self._host, None
        if host is not None:
            try:
                host.close()
            except Exception:  # closing a dead connection: nothing to do
                LOG.debug('memory home: connection not closed')

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self.run_once()
            except Exception:  # never let the thread die
                LOG.exception('memory home: attempt failed')
            self._wake.wait(self._next_wait())
            self._wake.clear()

    def _next_wait(self) -> float:
        with self._lock:
            if self._unwidened:
                return self._retry
            due = [self._not_before.get(u, 0.0) for u in self._todo]
        if not due:
            return IDLE_WAIT
        return max(0.0, min(min(due) - self._clock(), IDLE_WAIT))

    def run_once(self) -> typing.Optional[memhome_host.Outcome]:
        """One attempt: a nodeset left to widen, else the first guest
        due; None if nothing is."""
        with self._lock:
            widen = next(iter(sorted(self._unwidened.items())), None)
            now = self._clock()
            due = None if widen is not None else next(
                (c for u, c in sorted(self._todo.items())
                 if self._not_before.get(u, 0.0) <= now), None)
            if due is not None:
                self._not_before[due.uuid] = now + self._retry
        if widen is None and due is None:
            return None
        if self._host is None:
            self._host = self._connect()
        host = self._host
        before = dict(host.calls)
        if widen is not None:
            uuid, nodes = widen
            outcome = self._widen(host, uuid, nodes)
            name = uuid
            if outcome.widened:
                with self._lock:
                    self._unwidened.pop(uuid, None)
        else:
            assert due is not None
            uuid, name = due.uuid, due.name
            outcome = self._move(host, due.uuid, due.home, due.away_kib,
                                 due.every_node)
            if not outcome.widened:
                with self._lock:
                    self._unwidened[uuid] = due.every_node
            self.counts[outcome.result] += 1
            # A guest too large to move is no fault: said, not warned.
            (LOG.info if outcome.result in (memhome_host.Result.MOVED,
                                            memhome_host.Result.TOO_LARGE)
             else LOG.warning)('memory home of %s: %s (%s)', name,
                               outcome.result, outcome.reason)
        calls = {k: host.calls.get(k, 0) - before.get(k, 0)
                 for k in ('read', 'write')}
        if self._record is not None:
            # A widening alone is no move: only its calls count.
            self._record.record_memory_home(
                outcome.result if widen is None else None, calls)
        self.last = (name, outcome)
        return outcome
