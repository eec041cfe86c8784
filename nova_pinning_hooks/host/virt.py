"""The libvirt adapter's connection: ``Host``, its time bounds and events.

``Host`` is one libvirt connection with everything the package asks of
libvirt. It composes a reader (``virtread.Reader``: ``read_snapshot``,
the live host as a snapshot dict, the format ``nova-pinning plan``
reads; ``vcpu_stats``; ``vcpu_counts``) and a writer
(``virtwrite.Writer``: ``apply``, a list of ``plan.PinChange``), each
handed this connection; neither imports this module. This module keeps
the connection, the time bounds of every call and libvirt's events.
libvirt itself, its error codes and the clock the three share are in
``libvirtapi``, the only module that imports libvirt and the one place
tests swap it (``tests/fixtures.py``).

Invariants:

* ``calls`` counts every libvirt call made, as ``read`` and ``write``
  and by API name. (libvirt-python itself also asks for the host CPU
  count inside each pin call; that hidden call is not counted.)
* Every call is bounded in time: it runs on a ``timedcall.Worker`` and
  is given at most ``[nova_pinning] libvirt_call_timeout`` seconds, and
  no more than what is left of the pass's deadline (``set_deadline``).
  A call that overruns raises ``libvirtapi.LibvirtTimeout``; the
  connection and its worker are abandoned (closed on the worker's
  thread if the call ever returns) and the next call opens a new one.
  While an abandoned call is still blocked, calls to the same daemon
  fail at once (``hung``): one thread and one connection at most,
  however long libvirtd hangs.
* A connection lost under a call is reopened once (``with_reconnect``);
  a connection opened anew invalidates the host model it keeps current.
* Events (``watch(model, on_change)``): on each connection it opens, the
  Host registers for the domain events that can change what a plan is
  made from (lifecycle, reboot, tunables such as pins, devices, metadata,
  jobs) and for the connection's close; a callback only marks the model
  and calls ``on_change``, which must return at once (a coalescer's
  ``request``): it runs on libvirt's event thread and never calls libvirt.
  libvirt's default event loop is process-wide and must be registered
  before the connection opens (``start_event_loop``).
"""

import collections
import dataclasses
import threading
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import snapshot as snapshot_mod
from nova_pinning_hooks.host import hung
from nova_pinning_hooks.host import libvirtapi
from nova_pinning_hooks.host import model as model_mod
from nova_pinning_hooks.host import qemuproof
from nova_pinning_hooks.host import timedcall
from nova_pinning_hooks.host import virtread
from nova_pinning_hooks.host import virtwrite

LOG = logging.getLogger(__name__)

# The domain events after which a domain's XML, memory or threads may
# differ (a pin written live is a tunable event; a start, stop, resume
# or migration a lifecycle one).
EVENTS = ('LIFECYCLE', 'REBOOT', 'TUNABLE', 'DEVICE_ADDED', 'DEVICE_REMOVED',
          'METADATA_CHANGE', 'JOB_COMPLETED')
KEEPALIVE = (5, 3)  # interval (s), count: a dead daemon is seen in ~20 s

_EVENT_LOOP: typing.Optional[threading.Thread] = None
_EVENT_LOOP_LOCK = threading.Lock()

_T = typing.TypeVar('_T')
# ``on_change(reason)``: what ``watch`` tells of each event (its return
# value is not used)
_OnChange = typing.Callable[[str], object]


def start_event_loop() -> None:
    """Register libvirt's default event implementation and run it in a
    daemon thread; once per process, before any connection that is to
    carry events opens. Not in nova-compute, whose libvirt driver owns
    the process's event loop."""
    global _EVENT_LOOP
    with _EVENT_LOOP_LOCK:
        if _EVENT_LOOP is not None:
            return
        libvirtapi.libvirt.virEventRegisterDefaultImpl()
        _EVENT_LOOP = threading.Thread(target=_run_event_loop,
                                       name='nova-pinning-libvirt-events',
                                       daemon=True)
        _EVENT_LOOP.start()


def _run_event_loop() -> None:
    while True:
        try:
            libvirtapi.libvirt.virEventRunDefaultImpl()
        except Exception:  # keep the loop alive; a pause bounds a storm
            LOG.exception('libvirt event loop iteration failed')
            time.sleep(1)


@dataclasses.dataclass(frozen=True)
class HostOptions:
    """What a connection needs of the configuration: the ``[nova_pinning]``
    options of the same names (``passes.reconciler.host_options`` reads
    them; the defaults are conf.py's alone)."""
    busy_retries: int
    busy_retry_delay: float
    set_home_node: bool
    libvirt_call_timeout: float
    kernel_affinity: bool


def connect(uri: str, options: HostOptions) -> 'Host':
    """A ``Host`` for ``uri``; the connection opens on first use."""
    return Host(uri, options)


class Host:
    """One libvirt connection, reopened when lost, and its call counts;
    what it reads and writes is in its ``reader`` (``virtread``) and its
    ``writer`` (``virtwrite``), which reach libvirt through ``call``,
    ``connection`` and ``with_reconnect``."""

    def __init__(self, uri: str, options: HostOptions,
                 memory_reader: typing.Optional[
                     typing.Callable[[str], dict[str, int]]] = None,
                 run_dir: str = libvirtapi.RUN_DIR) -> None:
        self.uri = uri
        self.busy_retries = options.busy_retries
        self.busy_retry_delay = options.busy_retry_delay
        self.set_home_node = options.set_home_node
        self.call_timeout = options.libvirt_call_timeout
        self.kernel_affinity = options.kernel_affinity
        self.run_dir = run_dir
        self.proof = qemuproof.Proof()  # pids from libvirt, proven here
        self._conn: typing.Any = None  # libvirt's virConnect
        self._worker: typing.Optional[timedcall.Worker] = None
        # model.HostModel this Host keeps current
        self.model: typing.Optional[model_mod.HostModel] = None
        # (connection, {uuid: domain}) of the last listing: apply writes
        # to these objects while that connection is the one open.
        self.listed: tuple[typing.Any, dict[str, typing.Any]] = (None, {})
        self._on_change: typing.Optional[_OnChange] = None
        # event callback ids on self._conn
        self._callbacks: list[int] = []
        # time.monotonic() by which a pass must end
        self.deadline: typing.Optional[float] = None
        self.calls: collections.Counter[str] = collections.Counter()
        self.reader = virtread.Reader(self, memory_reader)
        self.writer = virtwrite.Writer(self)

    # -- what it reads and writes (virtread, virtwrite) -------------------

    def capabilities(self) -> str:
        return self.reader.capabilities()

    def read_snapshot(self,
                      model: typing.Optional[model_mod.HostModel] = None
                      ) -> snapshot_mod.LiveSnapshot:
        return self.reader.read_snapshot(model)

    def vcpu_stats(self) -> virtread.VcpuStats:
        return self.reader.vcpu_stats()

    def vcpu_counts(self) -> dict[str, int]:
        return self.reader.vcpu_counts()

    def pinned_guests(self) -> dict[str, list[str]]:
        return self.reader.pinned_guests()

    def unknown_facts(self) -> dict[str, typing.Optional[str]]:
        """{guest name: why} of the guests whose qemu process could not
        be proven here (``qemuproof``): their /proc facts are unknown."""
        return self.proof.unknown()

    def apply(self, changes: typing.Iterable[plan_mod.PinChange]
              ) -> virtwrite.ApplyResult:
        return self.writer.apply(changes)

    def set_deadline(self, deadline: typing.Optional[float]) -> None:
        """Bound every later call by ``deadline`` (monotonic; None: no
        bound beyond ``call_timeout``)."""
        self.deadline = deadline

    # -- connection -----------------------------------------------------

    def connection(self) -> typing.Any:
        if self._conn is not None and self._alive():
            return self._conn
        if self._conn is not None:
            LOG.warning('libvirt connection to %s lost; reopening', self.uri)
            self._drop()
        self._conn = self.call('read', 'open', libvirtapi.open_connection,
                               self.uri)
        if self.model is not None:
            # Whatever happened while no connection was open is unknown.
            self.model.invalidate('connection to %s opened' % self.uri)
            if self._on_change is not None:
                self._register_events()
        return self._conn

    # -- events ---------------------------------------------------------

    def watch(self, model: model_mod.HostModel,
              on_change: _OnChange) -> None:
        """Keep ``model`` current with libvirt's events from now on;
        ``on_change(reason)`` is called (on the event thread) after each
        one. ``start_event_loop`` must have run before the connection
        opens; an open connection is reopened so that it carries them."""
        self.model, self._on_change = model, on_change
        if self._conn is not None:
            self._drop()
        self.with_reconnect(self.connection)

    def _register_events(self) -> None:
        conn = self._conn
        for name in EVENTS:
            event = getattr(libvirtapi.libvirt, 'VIR_DOMAIN_EVENT_ID_' + name,
                            None)
            if event is None:  # an older libvirt: resync covers it
                continue
            self._callbacks.append(self.call(
                'read', 'domainEventRegisterAny', conn.domainEventRegisterAny,
                None, event, self._domain_event, name))
        self.call('read', 'registerCloseCallback',
                   conn.registerCloseCallback, self._closed, None)
        try:
            self.call('read', 'setKeepAlive', conn.setKeepAlive,
                       *KEEPALIVE)
        except libvirtapi.libvirt.libvirtError as exc:
            # e.g. a local test driver
            LOG.debug('libvirt keepalive not set: %s', exc)

    def _domain_event(self, conn: typing.Any, dom: typing.Any,
                      *args: typing.Any) -> None:
        """Any domain event; ``args[-1]`` is the event's name. On
        libvirt's event thread: mark and tell, nothing more."""
        # model and on_change: set by watch, before events are registered
        # (an AssertionError here is logged like any other failure)
        try:
            model = self.model
            assert model is not None
            model.mark(dom.UUIDString())  # local: no daemon call
            on_change = self._on_change  # after the mark: it stays
            assert on_change is not None
            on_change('%s event of %s' % (args[-1], dom.name()))
        except Exception:  # never into libvirt's loop
            LOG.exception('libvirt event not handled')

    def _closed(self, conn: typing.Any, reason: int,
                opaque: typing.Any) -> None:
        try:
            model = self.model
            assert model is not None
            model.invalidate('connection closed (reason %s)' % reason)
            on_change = self._on_change  # after the invalidation
            assert on_change is not None
            on_change('connection to %s closed' % self.uri)
        except Exception:
            LOG.exception('libvirt close event not handled')

    def _alive(self) -> bool:
        try:
            return bool(self._timed('isAlive', self._conn.isAlive))
        except libvirtapi.libvirt.libvirtError:
            return False

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self.listed = (None, {})
        callbacks, self._callbacks = self._callbacks, []

        def close() -> None:
            for callback in callbacks:
                try:
                    conn.domainEventDeregisterAny(callback)
                except Exception:  # dead already: nothing to release
                    break
            if callbacks:
                try:
                    conn.unregisterCloseCallback()
                except Exception:  # dead already: nothing to release
                    LOG.debug('close callback not unregistered')
            try:
                conn.close()
            except Exception:  # already dead: nothing to release
                LOG.debug('closing a dead libvirt connection failed')
        try:
            self._timed('close', close)
        except libvirtapi.LibvirtTimeout:
            pass  # abandoned with its worker

    def close(self) -> None:
        if self._conn is not None:
            self._drop()
        if self._worker is not None:
            self._worker.retire()
            self._worker = None

    def call(self, kind: str, api: str, func: typing.Callable[..., _T],
             *args: typing.Any) -> _T:
        self.calls[kind] += 1
        self.calls[api] += 1
        return self._timed(api, func, *args)

    def _timed(self, api: str, func: typing.Callable[..., _T],
               *args: typing.Any) -> _T:
        """``func(*args)`` on the worker, within the time bound."""
        timeout, bound = self.call_timeout, 'call timeout'
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise libvirtapi.LibvirtTimeout(
                    'pass deadline passed before libvirt call %s' % api)
            if left < timeout:
                timeout, bound = left, 'pass deadline'
        if self._worker is None:
            try:
                hung.check(self.uri)
            except hung.DoesNotAnswer as exc:
                raise libvirtapi.LibvirtTimeout(str(exc)) from None
            self._worker = timedcall.Worker('nova-pinning-libvirt')
        try:
            return self._worker.call(timeout, func, *args)
        except timedcall.CallTimeout:
            self._abandon()
            raise libvirtapi.LibvirtTimeout(
                'libvirt call %s to %s did not return within %.3g s (%s)' % (
                    api, self.uri, timeout, bound)) from None

    def _abandon(self) -> None:
        """Leave a hung connection to its worker: closed there, later."""
        conn, self._conn = self._conn, None
        self.listed = (None, {})
        self._callbacks = []
        if self.model is not None:
            self.model.invalidate('libvirt call timed out')
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.retire((lambda: conn.close()) if conn is not None
                          else None)
            hung.abandoned(self.uri, worker)

    def with_reconnect(self, func: typing.Callable[[], _T]) -> _T:
        """Run ``func()``; if the connection died under it, once more."""
        try:
            return func()
        except libvirtapi.libvirt.libvirtError:
            if self._conn is None or self._alive():
                raise
            LOG.warning('libvirt connection to %s lost; reopening',
                        self.uri)
            self._drop()
            return func()
