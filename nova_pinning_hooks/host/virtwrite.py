"""The libvirt adapter's writes: pin changes applied live (``Writer``,
the part of ``virt.Host`` that writes; ``Host.apply`` is its ``apply``).

Invariants:

* One call per change, with ``VIR_DOMAIN_AFFECT_LIVE`` only; the
  persistent definition is never touched, so nova's own view of the
  domain stays what nova wrote. The domain objects of the pass's listing
  are written to (no lookup per guest) while its connection stays open.
* A write never waits for another job of libvirt's: a domain paused by
  libvirt for one of its long jobs (starting up, which lasts until its
  ``createXML`` returns; migrating, being saved, dumped, snapshotted), or
  running in one (the source of a live migration until its switch-over,
  a live dump, a backup), is skipped with its reason and written by a
  later pass (its event, or the hook of the operation, asks for one). A
  pass with writes reads the state and reason of every paused domain in
  one call (``virConnectGetAllDomainStats``, state only: no job taken),
  so a domain paused by a client (nova starts guests paused) is still
  written, and the job of each other guest it writes
  (``virDomainGetJobStats``: a query job, which libvirt runs beside a
  migration; a read per written guest).
* Faults are normal: a domain that vanished or stopped is skipped, a busy
  one retried a bounded number of times (``busy_retries``), a lost
  connection reopened once. Every skip is logged with the guest's name;
  ``apply`` never raises for a libvirt fault, and a call that overruns
  its bound stops the writes of the pass (the rest skipped).

libvirt is reached through ``libvirtapi.libvirt`` at call time:
``libvirtapi`` stays the only module that imports it, and the one place
tests swap it. The connection is the ``virt.Host`` handed to ``Writer``;
this module does not import ``virt``.
"""

import collections
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.host import libvirtapi
LOG = logging.getLogger(__name__)


# The arguments of a write's call before its flags, from the change.
_Arguments = typing.Callable[['Writer', plan_mod.PinChange],
                             tuple[object, ...]]


def nodeset_params(nodes: typing.AbstractSet[int]) -> dict[str, object]:
    """``setNumaParameters``' parameters for a live memory nodeset of
    ``nodes``, in restrictive mode: libvirt (7.3 to 11.3 at least)
    changes a running guest's nodeset again only in that mode; a nodeset
    written without a mode makes it strict, and every later change
    (the widening after a move home) is refused. Live, both modes write
    the same cgroups' ``cpuset.mems``. The constants are libvirt's, read
    at call time (``libvirtapi``)."""
    lv = libvirtapi.libvirt
    return {lv.VIR_DOMAIN_NUMA_MODE: lv.VIR_DOMAIN_NUMATUNE_MEM_RESTRICTIVE,
            lv.VIR_DOMAIN_NUMA_NODESET: cpuset.format(frozenset(nodes))}


def _numa_nodeset(writer: 'Writer', change: plan_mod.PinChange
                  ) -> tuple[object, ...]:
    return (nodeset_params(change.new),)


# The one place a change's kind meets libvirt: kind -> (the domain's
# method that writes it, its arguments before VIR_DOMAIN_AFFECT_LIVE).
# Every ``plan.ChangeKind`` has a row (tests/unit/host/test_virtwrite.py).
WRITES: typing.Mapping[plan_mod.ChangeKind, tuple[str, _Arguments]] = {
    plan_mod.ChangeKind.VCPU: (
        'pinVcpuFlags', lambda w, c: (c.index, w._cpumap(c.new))),
    plan_mod.ChangeKind.EMULATOR: (
        'pinEmulator', lambda w, c: (w._cpumap(c.new),)),
    plan_mod.ChangeKind.IOTHREAD: (
        'pinIOThread', lambda w, c: (c.index, w._cpumap(c.new))),
    plan_mod.ChangeKind.NUMA: ('setNumaParameters', _numa_nodeset),
}


class ApplyResult(typing.NamedTuple):
    applied: list[plan_mod.PinChange]
    # (PinChange or guest name, reason)
    skipped: list[tuple[typing.Union[plan_mod.PinChange, str], str]]
    error: list[str]  # [] or [one message]: the writes stopped early
    # uuids not written: a job of libvirt's
    held: typing.AbstractSet[str] = frozenset()


class WriterHost(libvirtapi.HostCalls, typing.Protocol):
    """What ``Writer`` uses of its ``virt.Host`` besides its calls."""
    set_home_node: bool
    busy_retries: int
    busy_retry_delay: float

    def capabilities(self) -> str: ...


class Writer:
    """What ``virt.Host`` writes; uses its connection and bounded calls
    (``host.connection``, ``host.call``, ``host.with_reconnect``)."""

    def __init__(self, host: WriterHost) -> None:
        self.host = host
        self._ncpus: typing.Optional[int] = None

    def _cpumap(self, cpus: typing.AbstractSet[int]) -> tuple[bool, ...]:
        if self._ncpus is None:
            import xml.etree.ElementTree as ET  # noqa: S405 - libvirt's XML
            root = ET.fromstring(self.host.capabilities())  # noqa: S314
            ids = [int(c.get('id', '')) for c in root.iter('cpu')
                   if (c.get('id') or '').isdigit()]
            self._ncpus = max(ids) + 1
        return tuple(i in cpus for i in range(self._ncpus))


    def apply(self, changes: typing.Iterable[plan_mod.PinChange]
              ) -> ApplyResult:
        """Write ``changes`` (``plan.PinChange``); never raises for a
        libvirt fault: what could not be written is in ``skipped``."""
        held_uuids: set[str] = set()  # the result's ``held``
        result = ApplyResult([], [], [], held_uuids)
        by_guest: collections.OrderedDict[
            str, list[plan_mod.PinChange]] = collections.OrderedDict()
        for change in changes:
            if change.kind == plan_mod.ChangeKind.NUMA and \
                    not self.host.set_home_node:
                continue
            by_guest.setdefault(change.uuid, []).append(change)
        pending = list(by_guest.items())
        if not pending:
            return result
        try:
            held = self.host.with_reconnect(lambda: self._held(by_guest))
        except libvirtapi.LibvirtTimeout as exc:
            self._stop_writes(result, pending, exc)
            return result
        except libvirtapi.libvirt.libvirtError as exc:
            LOG.warning('state of the paused guests not read (%s); a '
                        'write may wait for a job of libvirt\'s', exc)
            held = {}
        for n, (uuid, group) in enumerate(pending):
            if uuid in held:
                # Its event (or the operation's hook) asks for the pass
                # that writes it.
                held_uuids.add(uuid)
                self._skip(result, group, group[0].name,
                           'guest %s: written once libvirt\'s job on it '
                           'ends' % held[uuid], log=LOG.debug)
                continue
            try:
                self.host.with_reconnect(
                    lambda u=uuid, g=group:  # type: ignore[misc]
                    self._apply_guest(u, g, result))
            except libvirtapi.LibvirtTimeout as exc:
                self._stop_writes(result, pending[n:], exc)
                break
            except libvirtapi.libvirt.libvirtError as exc:
                done = set(map(id, result.applied))
                for change in group:
                    if id(change) not in done:
                        result.skipped.append((change, str(exc)))
                LOG.warning('guest %s: pins not written: %s',
                            group[0].name, exc)
        return result

    def _stop_writes(self, result: ApplyResult,
                     pending: typing.Iterable[
                         tuple[str, list[plan_mod.PinChange]]],
                     exc: Exception) -> None:
        """No more writes this pass: what is left is skipped."""
        done = set(map(id, result.applied))
        for _, rest in pending:
            result.skipped.extend((c, 'not written: %s' % exc)
                                  for c in rest if id(c) not in done)
        result.error.append(str(exc))
        LOG.error('pin writes stopped: %s', exc)

    def _held(self, by_guest: typing.Mapping[
            str, typing.Sequence[plan_mod.PinChange]]) -> dict[str, str]:
        """{uuid: why} of the guests of ``by_guest`` that a job of
        libvirt's holds: paused for one of its long jobs
        (``libvirtapi.HELD``: the state of every paused domain, in one
        call), or running in one (``_job``: a call for each of the
        others)."""
        records = self.host.call(
            'read', 'getAllDomainStats',
            self.host.connection().getAllDomainStats,
            libvirtapi.libvirt.VIR_DOMAIN_STATS_STATE,
            libvirtapi.libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_PAUSED)
        held = {}
        for dom, stats in records:
            uuid = dom.UUIDString()  # local: no call to the daemon
            reason = stats.get('state.reason')
            paused = libvirtapi.libvirt.VIR_DOMAIN_PAUSED
            if uuid in by_guest and reason in libvirtapi.HELD and \
                    stats.get('state.state') == paused:
                held[uuid] = libvirtapi.HELD[reason]
        for uuid, group in by_guest.items():
            if uuid not in held:
                why = self._job(uuid, group[0].name)
                if why is not None:
                    held[uuid] = why
        return held

    def _job(self, uuid: str, name: str) -> typing.Optional[str]:
        """Why a job of libvirt's holds the domain ``uuid`` while it
        runs (the source of a live migration runs until its switch-over,
        minutes for a large guest); None if no job does.

        ``jobStats`` takes only a query job, which libvirt lets run
        beside a migration, and asks qemu for the migration's progress: it
        returns while qemu answers its monitor. A pin call would instead
        wait for the job's end (libvirt's 30 s, then busy), and the pass
        with it."""
        try:
            stats = self.host.call('read', 'jobStats',
                                   self._domain(uuid).jobStats, 0)
        except libvirtapi.libvirt.libvirtError as exc:
            if libvirtapi.code(exc) == libvirtapi.JOB_UNSUPPORTED:
                return 'migrating in'  # libvirt: "only on the source"
            if libvirtapi.code(exc) not in libvirtapi.GONE:
                # Its write says what else is wrong with it.
                LOG.warning('guest %s: its job not read (%s); a write '
                            'may wait for one', name, exc)
            return None
        if stats.get('type', libvirtapi.JOB_NONE) == libvirtapi.JOB_NONE:
            return None
        return libvirtapi.JOB_OPERATION.get(stats.get('operation'),
                                            'in a job')

    def _domain(self, uuid: str) -> typing.Any:
        """The domain object to write to: the listing's (or one looked
        up earlier), while its connection is the open one; else looked
        up."""
        conn = self.host.connection()
        listed_conn, listed = self.host.listed
        dom = listed.get(uuid) if listed_conn is conn else None
        if dom is None:
            dom = self.host.call('read', 'lookupByUUIDString',
                                 conn.lookupByUUIDString, uuid)
            # Kept with the listing's: its job read and its writes are
            # made to the one object, looked up once.
            if listed_conn is not conn:
                listed = {}
            self.host.listed = (conn, dict(listed, **{uuid: dom}))
        return dom

    def _apply_guest(self, uuid: str,
                     changes: typing.Sequence[plan_mod.PinChange],
                     result: ApplyResult) -> None:
        name = changes[0].name
        done = {id(c) for c in result.applied}
        todo = [c for c in changes if id(c) not in done]
        try:
            dom = self._domain(uuid)
        except libvirtapi.libvirt.libvirtError as exc:
            if libvirtapi.code(exc) in libvirtapi.GONE:
                self._skip(result, todo, name, 'guest went away')
                return
            raise
        for i, change in enumerate(todo):
            try:
                self._write(dom, change)
            except libvirtapi.libvirt.libvirtError as exc:
                if libvirtapi.code(exc) in libvirtapi.GONE:
                    self._skip(result, todo[i:], name,
                               'guest went away or stopped')
                    return
                if libvirtapi.code(exc) in libvirtapi.BUSY:
                    self._skip(result, [change], name,
                               'guest busy in another job')
                    continue
                raise
            result.applied.append(change)

    def _skip(self, result: ApplyResult,
              changes: typing.Sequence[plan_mod.PinChange], name: str,
              why: str,
              log: typing.Callable[..., object] = LOG.info) -> None:
        log('guest %s: %d pin change(s) skipped: %s', name, len(changes),
            why)
        result.skipped.extend((c, why) for c in changes)

    def _write(self, dom: typing.Any,
               change: plan_mod.PinChange) -> typing.Any:
        api, arguments = WRITES[change.kind]
        func = getattr(dom, api)
        args = arguments(self, change) + (
            libvirtapi.libvirt.VIR_DOMAIN_AFFECT_LIVE,)
        for attempt in range(self.host.busy_retries + 1):
            try:
                return self.host.call('write', api, func, *args)
            except libvirtapi.libvirt.libvirtError as exc:
                if libvirtapi.code(exc) not in libvirtapi.BUSY or \
                        attempt == self.host.busy_retries:
                    raise
                LOG.info('guest %s busy; retrying %s', change.name, api)
                time.sleep(self.host.busy_retry_delay)

