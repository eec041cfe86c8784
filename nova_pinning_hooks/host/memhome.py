"""Moving an arrived guest's memory to its home node: the host's act.

An arrived guest (migrated in, restored: ``engine.guest.Guest.arrived``)
whose memory qemu's incoming copy split over several nodes is homed by
the policy and bound there like a guest born there; its pages stay where
the copy put them until something moves them. ``move`` does that once
for one guest: a live memory nodeset of the home node alone, in
restrictive mode (``virDomainSetNumaParameters``, as ``set_home_node``
writes: ``virtwrite.nodeset_params``; strict would forbid the widening
below); libvirt
writes the guest's cgroup ``cpuset.mems``, and the kernel migrates its
pages within that write: cgroup v2 always, v1 with the
``cpuset.memory_migrate`` libvirt sets), then the nodeset widened again
to every node of the host.

Invariants:

* never a nova operation failed for it: libvirt holds the guest's
  modify job while the home write copies pages, and nova's next call
  on that guest waits for the job 30 s (libvirt's bound) before it
  fails; a move of more than ``MAX_MOVE_KIB`` is not started
  (``TOO_LARGE``), so that a job is held seconds, not tens;
* never an OOM kill: the move starts only when the home node's free
  memory (``MemFree`` of ``/sys/devices/system/node/node<N>/meminfo``)
  holds what must move plus ``reserve_kib``; otherwise nothing is
  written (``NO_ROOM``);
* a nodeset of the home node written to move pages is always widened
  again, to every node of the host, so that a full home node cannot
  starve the guest later; a widening that could not be written is reported
  (``widened`` False) for the caller to write again;
* bounded in time: the home write gets ``time_bound`` seconds (the
  kernel's copy runs inside it: ``BASE_SECONDS`` plus
  ``SECONDS_PER_GIB`` a GiB to move), every other call the connection's
  own bound; a move that overruns is ``TIMEOUT``, and the write is
  abandoned with its connection (``virt.Host``);
* every libvirt call goes through ``virt.Host.call`` and is counted there
  (``read``: the lookup; ``write``: the two nodesets);
* never raises: libvirt's errors and timeouts are outcomes (``FAILED``,
  ``GONE``, ``TIMEOUT``), with a one-line reason.
"""

import os
import typing

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import names
from nova_pinning_hooks.host import libvirtapi
from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.host import virtwrite

NODE_ROOT = '/sys/devices/system/node'
MEMINFO_LIMIT = 8192  # a node's meminfo: about 1.2 KiB
GIB_KIB = 1024 * 1024
# The time bound of one move: a fixed part and a part per GiB to move.
# Measured in the 2-socket TCG VM: about 5.2 s a GiB (issue 61); real
# hardware moves pages far faster.
BASE_SECONDS = 30.0
SECONDS_PER_GIB = 20.0
# Free memory left on the home node after a move, at least.
RESERVE_KIB = 256 * 1024
# The most one move copies: 8 s at 1 GiB/s, a slow host's page
# migration, a quarter of the 30 s a nova call waits for libvirt's job
# (the TCG VM, at 5.2 s a GiB, is no such host). Larger arrivals keep
# their pages where the copy put them (the kernel's NUMA balancing
# gathers what the guest touches); retried, the part away may shrink.
MAX_MOVE_KIB = 8 * GIB_KIB


class Result(names.Name):
    """How one move ended (``Outcome.result``; the metric's label)."""
    MOVED = 'moved'  # the home write returned: pages moved home
    NO_ROOM = 'no-room'  # the home node's free memory would not hold it
    TOO_LARGE = 'too-large'  # more than MAX_MOVE_KIB away: not started
    TIMEOUT = 'timeout'  # the home write overran its bound
    FAILED = 'failed'  # libvirt refused or failed
    GONE = 'gone'  # the guest went away


class Outcome(typing.NamedTuple):
    result: Result
    reason: str
    seconds: float = 0.0
    widened: bool = True  # False: a home nodeset is left to widen


class MoveHost(typing.Protocol):
    """What ``move`` uses of a ``virt.Host``."""
    call_timeout: float

    def connection(self) -> typing.Any: ...

    def call(self, kind: str, api: str,
             func: typing.Callable[..., typing.Any],
             *args: typing.Any) -> typing.Any: ...


def node_free_kib(node: int, root: str = NODE_ROOT) -> typing.Optional[int]:
    """KiB free on NUMA node ``node`` (its ``MemFree``), or None when it
    cannot be read."""
    path = os.path.join(root, 'node%d' % node, 'meminfo')
    try:
        text = safefs.read_file(path, MEMINFO_LIMIT, 'node meminfo')
    except OSError:
        return None
    for line in text.decode('ascii', 'replace').splitlines():
        # "Node 0 MemFree:  123456 kB"
        fields = line.split()
        if len(fields) >= 4 and fields[2] == 'MemFree:' and \
                fields[3].isascii() and fields[3].isdigit():
            return int(fields[3])
    return None


def time_bound(away_kib: int) -> float:
    """Seconds a move of ``away_kib`` may take: ``BASE_SECONDS`` plus
    ``SECONDS_PER_GIB`` a GiB."""
    return BASE_SECONDS + SECONDS_PER_GIB * away_kib / GIB_KIB


def _nodeset(dom: typing.Any, host: MoveHost,
             nodes: typing.AbstractSet[int]) -> None:
    host.call('write', 'setNumaParameters', dom.setNumaParameters,
              virtwrite.nodeset_params(nodes),
              libvirtapi.libvirt.VIR_DOMAIN_AFFECT_LIVE)


def widen(host: MoveHost, uuid: str,
          every_node: typing.AbstractSet[int],
          dom: typing.Any = None) -> Outcome:
    """Write the nodeset of every node (after a move; again after a
    move whose own widening failed); ``dom``: the domain if looked up
    already. Never raises."""
    try:
        if dom is None:
            conn = host.connection()
            dom = host.call('read', 'lookupByUUIDString',
                            conn.lookupByUUIDString, uuid)
        _nodeset(dom, host, every_node)
    except Exception as exc:
        return _failed(exc, False, host, dom)
    return Outcome(Result.MOVED, 'widened to nodes %s'
                   % cpuset.format(frozenset(every_node)))


def _failed(exc: Exception, widened: bool, host: MoveHost,
            dom: typing.Any = None) -> Outcome:
    if isinstance(exc, libvirtapi.LibvirtTimeout):
        return Outcome(Result.TIMEOUT, str(exc), widened=widened)
    if isinstance(exc, libvirtapi.libvirt.libvirtError) and \
            libvirtapi.code(exc) in libvirtapi.GONE and \
            not _running(host, dom):
        # Nothing is left to widen on a guest that is gone.
        return Outcome(Result.GONE, 'went away', widened=True)
    return Outcome(Result.FAILED, '%s: %s' % (type(exc).__name__, exc),
                   widened=widened)


def _running(host: MoveHost, dom: typing.Any) -> bool:
    """Whether a domain whose write failed as if gone still runs:
    libvirt refuses a nodeset it will not change with the same code
    (``VIR_ERR_OPERATION_INVALID``) as a write to a stopped domain, and
    such a refusal taken for "gone" once hid a widening that failed."""
    if dom is None:
        return False
    try:
        return bool(host.call('read', 'isActive', dom.isActive))
    except Exception:
        return False  # gone by now, or unknown: not retried for ever


def move(host: MoveHost, uuid: str, home: int, away_kib: int,
         every_node: typing.AbstractSet[int],
         reserve_kib: int = RESERVE_KIB,
         free_kib: typing.Callable[[int], typing.Optional[int]] =
         node_free_kib, max_move_kib: int = MAX_MOVE_KIB) -> Outcome:
    """Move guest ``uuid``'s memory to node ``home`` (``away_kib``: what
    lies elsewhere now), then widen its nodeset to ``every_node``.
    Never raises."""
    if away_kib > max_move_kib:
        return Outcome(Result.TOO_LARGE, '%d KiB to move, more than the '
                       '%d KiB a move may copy while it holds libvirt\'s '
                       'job' % (away_kib, max_move_kib))
    free = free_kib(home)
    if free is None or free < away_kib + reserve_kib:
        return Outcome(Result.NO_ROOM, 'node %d has %s KiB free, %d KiB to '
                       'move and %d KiB kept free' % (
                           home, 'unknown' if free is None else free,
                           away_kib, reserve_kib))
    start = libvirtapi.now()
    try:
        conn = host.connection()
        dom = host.call('read', 'lookupByUUIDString',
                        conn.lookupByUUIDString, uuid)
    except Exception as exc:
        return _failed(exc, True, host)
    usual = host.call_timeout
    bound = time_bound(away_kib)
    host.call_timeout = bound
    failed: typing.Optional[Outcome] = None
    try:
        _nodeset(dom, host, {home})
    except Exception as exc:
        failed = _failed(exc, False, host, dom)
    finally:
        host.call_timeout = usual
    seconds = libvirtapi.now() - start
    # Widened whatever happened: a home nodeset of a full node would
    # starve the guest later. After a timeout the connection is
    # abandoned and this fails at once: the caller widens later.
    widened = widen(host, uuid, every_node, dom)
    if failed is not None:
        return failed._replace(seconds=seconds, widened=(
            failed.result == Result.GONE or widened.widened))
    if not widened.widened:
        return Outcome(Result.MOVED, 'moved; not widened: %s'
                       % widened.reason, seconds, widened=False)
    return Outcome(Result.MOVED, '%d KiB to node %d in %.1f s (bound '
                   '%.0f s)' % (away_kib, home, seconds, bound), seconds)
