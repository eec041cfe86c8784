"""The libvirt adapter: the only module of the package that imports libvirt.

``Host.read_snapshot`` reads the live host as a snapshot dict (the format
``nova-pinning plan`` reads); ``Host.apply`` writes a list of
``plan.PinChange``. Tests swap libvirt for a fake at this one place
(``tests/fixtures.py``).

Invariants:

* Reads: one capabilities call per connection (cached), one listing of
  the active domains and one ``XMLDesc`` per domain per pass; a pass
  that writes also reads the state of the paused domains (see below).
  The memory placement of a guest comes from its qemu process's memory
  cgroup (``memplace``; ``numa_maps`` only as the fallback), not from
  libvirt.
* Writes: one call per change, with ``VIR_DOMAIN_AFFECT_LIVE`` only; the
  persistent definition is never touched, so nova's own view of the
  domain stays what nova wrote. The domain objects of the pass's listing
  are written to (no lookup per guest) while its connection stays open.
* A write never waits for another job of libvirt's: a domain paused by
  libvirt for one of its long jobs (starting up, which lasts until its
  ``createXML`` returns; migrating, being saved, dumped, snapshotted) is
  skipped with its reason and written by a later pass (its event, or the
  hook of the operation, asks for one). A pass with writes reads the
  state and reason of every paused domain in one call
  (``virConnectGetAllDomainStats``, state only: no job taken), so a
  domain paused by a client (nova starts guests paused) is still
  written.
* Faults are normal: a domain that vanished or stopped is skipped, a busy
  one retried a bounded number of times, a lost connection reopened once.
  Every skip is logged with the guest's name; ``apply`` never raises for
  a libvirt fault.
* ``calls`` counts every libvirt call made, as ``read`` and ``write``.
  (libvirt-python itself also asks for the host CPU count inside each pin
  call; that hidden call is not counted.)
* Every call is bounded in time: it runs on a ``timedcall.Worker`` and
  is given at most ``[nova_pinning] libvirt_call_timeout`` seconds, and
  no more than what is left of the pass's deadline (``set_deadline``).
  A call that overruns raises ``LibvirtTimeout``; the connection and its
  worker are abandoned (closed on the worker's thread if the call ever
  returns) and the next call opens a new one.
* With ``kernel_affinity`` (the default), the live snapshot also carries
  each vCPU thread's affinity as the kernel enforces it
  (``qemuproc.vcpu_affinity``), so drift behind libvirt's back is seen.
* A qemu pid from libvirt is read through /proc only once proven to be
  that guest's qemu here (``qemuproof``: another PID namespace, such as
  kolla's nova_compute, numbers processes differently); without proof the
  guest's memory placement, affinity and schedstat are unknown ({}).
* ``vcpu_stats`` reads every running guest's vCPU counters in one bulk
  call (``virConnectGetAllDomainStats``), counted as one read; a guest
  for which libvirt reports no ``vcpu.N.delay`` gets both counters from
  its vCPU threads' ``schedstat`` instead (``qemuproc.vcpu_schedstat``),
  never a mix of the two sources.
* ``vcpu_counts`` (the hot-plug poll, every second) lists the running
  domains and asks each one's online vCPU count from libvirt's live
  definition (``vcpusFlags(AFFECT_LIVE)``): a read per guest, never a job
  on the guest or a round trip to its qemu monitor, which the bulk stats'
  vCPU group makes for every guest.
* Incremental reads (``read_snapshot(model)``, ``model.HostModel``): one
  listing call, then ``XMLDesc``, memory placement and thread affinity
  only for the domains the model cannot vouch for. A connection opened
  anew invalidates the model (events may have been missed meanwhile).
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
import os
import threading
import time
import typing

import libvirt

from oslo_log import log as logging

from nova_pinning_hooks import cpuset
from nova_pinning_hooks import hung
from nova_pinning_hooks import memplace
from nova_pinning_hooks import qemuproc
from nova_pinning_hooks import qemuproof
from nova_pinning_hooks import timedcall

LOG = logging.getLogger(__name__)


def _ignore_error(_ctx, _err):
    """libvirt's default handler prints every error on stderr
    (``libvirt: XML-RPC error : ...``); the caller reports it once."""


def quiet_errors():
    """Stop libvirt printing its own error lines: for our commands, whose
    errors are one line of their own. Process-wide, so never called in
    nova-compute (nova's libvirt shares the handler)."""
    libvirt.registerErrorHandler(_ignore_error, None)


RUN_DIR = '/run/libvirt/qemu'
GONE = (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_OPERATION_INVALID)
BUSY = (libvirt.VIR_ERR_OPERATION_TIMEOUT,)
# Why libvirt pauses a domain while one of its asynchronous jobs holds it
# (qemu's start, migration, save, dump, snapshot): a pin call, which needs
# a job of its own, would wait for that one to end (up to libvirt's 30 s,
# then fail as busy). A domain paused for another reason (by a client,
# after an I/O error) has no job and is written at once.
HELD = {getattr(libvirt, 'VIR_DOMAIN_PAUSED_' + name): text
        for name, text in (('STARTING_UP', 'starting up'),
                           ('MIGRATION', 'migrating'),
                           ('SAVE', 'being saved'), ('DUMP', 'being dumped'),
                           ('SNAPSHOT', 'in a snapshot'))
        if hasattr(libvirt, 'VIR_DOMAIN_PAUSED_' + name)}


_now = time.monotonic  # the clock of samples; tests replace it

# The domain events after which a domain's XML, memory or threads may
# differ (a pin written live is a tunable event; a start, stop, resume
# or migration a lifecycle one).
EVENTS = ('LIFECYCLE', 'REBOOT', 'TUNABLE', 'DEVICE_ADDED', 'DEVICE_REMOVED',
          'METADATA_CHANGE', 'JOB_COMPLETED')
KEEPALIVE = (5, 3)  # interval (s), count: a dead daemon is seen in ~20 s

_EVENT_LOOP = None
_EVENT_LOOP_LOCK = threading.Lock()


def start_event_loop():
    """Register libvirt's default event implementation and run it in a
    daemon thread; once per process, before any connection that is to
    carry events opens. Not in nova-compute, whose libvirt driver owns
    the process's event loop."""
    global _EVENT_LOOP
    with _EVENT_LOOP_LOCK:
        if _EVENT_LOOP is not None:
            return
        libvirt.virEventRegisterDefaultImpl()
        _EVENT_LOOP = threading.Thread(target=_run_event_loop,
                                       name='nova-pinning-libvirt-events',
                                       daemon=True)
        _EVENT_LOOP.start()


def _run_event_loop():
    while True:
        try:
            libvirt.virEventRunDefaultImpl()
        except Exception:  # keep the loop alive; a pause bounds a storm
            LOG.exception('libvirt event loop iteration failed')
            time.sleep(1)


class LibvirtTimeout(Exception):
    """A libvirt call overran its time bound or the pass's deadline."""


class ApplyResult(typing.NamedTuple):
    applied: list  # PinChange
    skipped: list  # (PinChange or guest name, reason)
    error: list  # [] or [one message]: the writes stopped early
    held: object = frozenset()  # uuids not written: a job of libvirt's


def connect(uri, conf=None):
    """A ``Host`` for ``uri``; the connection opens on first use."""
    return Host(uri, conf=conf)


def read_memory_by_node(pid, proc='/proc'):
    """KiB of a qemu process's anonymous (guest RAM) memory per NUMA node.

    Sums the ``N<node>=<pages>`` fields of ``/proc/PID/numa_maps`` for
    anonymous and huge-page mappings; file mappings (libraries) are left
    out. Returns {} when the process or the file is gone.
    """
    result = collections.Counter()
    try:
        with open(os.path.join(proc, str(pid), 'numa_maps'),
                  encoding='ascii', errors='replace') as f:
            for line in f:
                fields = line.split()
                if not any(x.startswith('anon=') or x == 'huge'
                           for x in fields):
                    continue
                page_kib = 4
                for x in fields:
                    if x.startswith('kernelpagesize_kB='):
                        page_kib = int(x.split('=', 1)[1])
                for x in fields:
                    if x[:1] == 'N' and '=' in x:
                        node, _, pages = x[1:].partition('=')
                        if node.isdigit() and pages.isdigit():
                            result[int(node)] += int(pages) * page_kib
    except (OSError, ValueError):
        return {}
    return {str(n): kib for n, kib in sorted(result.items())}


def qemu_pid(name, run_dir=RUN_DIR):
    """The pid libvirt recorded for a running guest, or None."""
    return qemuproc.qemu_pid(name, run_dir)


def _code(exc):
    return exc.get_error_code() if isinstance(exc, libvirt.libvirtError) \
        else None


class Host:
    """One libvirt connection, reopened when lost, and its call counts."""

    def __init__(self, uri, conf=None, memory_reader=None, run_dir=RUN_DIR):
        self.uri = uri
        group = getattr(conf, 'nova_pinning', None)
        self.busy_retries = getattr(group, 'busy_retries', 3)
        self.busy_retry_delay = getattr(group, 'busy_retry_delay', 0.5)
        self.set_home_node = getattr(group, 'set_home_node', False)
        self.call_timeout = getattr(group, 'libvirt_call_timeout', 30.0)
        self.kernel_affinity = getattr(group, 'kernel_affinity', True)
        self.run_dir = run_dir
        self.proof = qemuproof.Proof()  # pids from libvirt, proven here
        self._memory_reader = memory_reader or self._memory_from_proc
        self._conn = None
        self._caps = None
        self._ncpus = None
        self._worker = None
        self._model = None  # model.HostModel this Host keeps current
        # (connection, {uuid: domain}) of the last listing: apply writes
        # to these objects while that connection is the one open.
        self._listed = (None, {})
        self._on_change = None
        self._callbacks = []  # event callback ids on self._conn
        self.deadline = None  # time.monotonic() by which a pass must end
        self.calls = collections.Counter()

    def set_deadline(self, deadline):
        """Bound every later call by ``deadline`` (monotonic; None: no
        bound beyond ``call_timeout``)."""
        self.deadline = deadline

    # -- connection -----------------------------------------------------

    def _connection(self):
        if self._conn is not None and self._alive():
            return self._conn
        if self._conn is not None:
            LOG.warning('libvirt connection to %s lost; reopening', self.uri)
            self._drop()
        self._conn = self._call('read', 'open', libvirt.open, self.uri)
        if self._model is not None:
            # Whatever happened while no connection was open is unknown.
            self._model.invalidate('connection to %s opened' % self.uri)
            if self._on_change is not None:
                self._register_events()
        return self._conn

    # -- events ---------------------------------------------------------

    def watch(self, model, on_change):
        """Keep ``model`` current with libvirt's events from now on;
        ``on_change(reason)`` is called (on the event thread) after each
        one. ``start_event_loop`` must have run before the connection
        opens; an open connection is reopened so that it carries them."""
        self._model, self._on_change = model, on_change
        if self._conn is not None:
            self._drop()
        self._with_reconnect(self._connection)

    def _register_events(self):
        conn = self._conn
        for name in EVENTS:
            event = getattr(libvirt, 'VIR_DOMAIN_EVENT_ID_' + name, None)
            if event is None:  # an older libvirt: resync covers it
                continue
            self._callbacks.append(self._call(
                'read', 'domainEventRegisterAny', conn.domainEventRegisterAny,
                None, event, self._domain_event, name))
        self._call('read', 'registerCloseCallback',
                   conn.registerCloseCallback, self._closed, None)
        try:
            self._call('read', 'setKeepAlive', conn.setKeepAlive,
                       *KEEPALIVE)
        except libvirt.libvirtError as exc:  # e.g. a local test driver
            LOG.debug('libvirt keepalive not set: %s', exc)

    def _domain_event(self, conn, dom, *args):
        """Any domain event; ``args[-1]`` is the event's name. On
        libvirt's event thread: mark and tell, nothing more."""
        try:
            self._model.mark(dom.UUIDString())  # local: no daemon call
            self._on_change('%s event of %s' % (args[-1], dom.name()))
        except Exception:  # never into libvirt's loop
            LOG.exception('libvirt event not handled')

    def _closed(self, conn, reason, opaque):
        try:
            self._model.invalidate('connection closed (reason %s)' % reason)
            self._on_change('connection to %s closed' % self.uri)
        except Exception:
            LOG.exception('libvirt close event not handled')

    def _alive(self):
        try:
            return bool(self._timed('isAlive', self._conn.isAlive))
        except libvirt.libvirtError:
            return False

    def _drop(self):
        conn, self._conn = self._conn, None
        self._listed = (None, {})
        callbacks, self._callbacks = self._callbacks, []

        def close():
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
        except LibvirtTimeout:
            pass  # abandoned with its worker

    def close(self):
        if self._conn is not None:
            self._drop()
        if self._worker is not None:
            self._worker.retire()
            self._worker = None

    def _call(self, kind, api, func, *args):
        self.calls[kind] += 1
        self.calls[api] += 1
        return self._timed(api, func, *args)

    def _timed(self, api, func, *args):
        """``func(*args)`` on the worker, within the time bound."""
        timeout, bound = self.call_timeout, 'call timeout'
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise LibvirtTimeout('pass deadline passed before libvirt '
                                     'call %s' % api)
            if left < timeout:
                timeout, bound = left, 'pass deadline'
        if self._worker is None:
            try:
                hung.check(self.uri)
            except hung.DoesNotAnswer as exc:
                raise LibvirtTimeout(str(exc)) from None
            self._worker = timedcall.Worker('nova-pinning-libvirt')
        try:
            return self._worker.call(timeout, func, *args)
        except timedcall.CallTimeout:
            self._abandon()
            raise LibvirtTimeout('libvirt call %s to %s did not return '
                                 'within %.3g s (%s)' % (
                                     api, self.uri, timeout, bound)) from None

    def _abandon(self):
        """Leave a hung connection to its worker: closed there, later."""
        conn, self._conn = self._conn, None
        self._listed = (None, {})
        self._callbacks = []
        if self._model is not None:
            self._model.invalidate('libvirt call timed out')
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.retire((lambda: conn.close()) if conn is not None
                          else None)
            hung.abandoned(self.uri, worker)

    def _with_reconnect(self, func):
        """Run ``func()``; if the connection died under it, once more."""
        try:
            return func()
        except libvirt.libvirtError:
            if self._conn is None or self._alive():
                raise
            LOG.warning('libvirt connection to %s lost; reopening',
                        self.uri)
            self._drop()
            return func()

    # -- reading --------------------------------------------------------

    def capabilities(self):
        if self._caps is None:
            self._caps = self._with_reconnect(lambda: self._call(
                'read', 'getCapabilities',
                self._connection().getCapabilities))
        return self._caps

    def read_snapshot(self, model=None):
        """The live host: capabilities and the active domains. With a
        ``model.HostModel``, only what it cannot vouch for is read."""
        if model is None:
            return self._with_reconnect(self._read)
        self._model = model
        return self._with_reconnect(self._read_changed)

    def _read_changed(self):
        conn = self._connection()  # may invalidate the model: first
        caps = self.capabilities()
        model = self._model
        everything, marked = model.take()
        try:
            doms = self._call('read', 'listAllDomains', conn.listAllDomains,
                              libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
            # UUID, id and name are local to the domain object.
            listing = [(d.UUIDString(), d.ID(), d.name()) for d in doms]
            by_uuid = {entry[0]: (dom, entry)
                       for dom, entry in zip(doms, listing)}
            self._listed = (conn, {u: d for u, (d, _) in by_uuid.items()})
            for uuid in model.to_fetch(listing, everything, marked):
                dom, (_, dom_id, name) = by_uuid[uuid]
                xml = self._live_xml(dom, name)
                if xml is None:
                    model.forget(uuid)
                    continue
                model.store(uuid, dom_id, name, xml,
                            self._memory_reader(name),
                            self._affinity(name) if self.kernel_affinity
                            else None)
        except BaseException:
            model.give_back(everything, marked)
            raise
        domains = [d.entry() for d in model.domains(listing)]
        return {'version': 1, 'capabilities': caps, 'domains': domains}

    def _live_xml(self, dom, name):
        """The domain's live XML; None if it went away meanwhile."""
        try:
            return self._call('read', 'XMLDesc', dom.XMLDesc, 0)
        except libvirt.libvirtError as exc:
            if _code(exc) in GONE:
                LOG.info('guest %s went away while being read; skipped',
                         name)
                return None
            raise

    def _read(self):
        conn = self._connection()
        caps = self.capabilities()
        doms = self._call('read', 'listAllDomains', conn.listAllDomains,
                          libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        self._listed = (conn, {d.UUIDString(): d for d in doms})
        domains = []
        for dom in doms:
            name = dom.name()  # local: no call to the daemon
            xml = self._live_xml(dom, name)
            if xml is None:
                continue
            entry = {'xml': xml, 'active': True,
                     'memory_by_node_kib': self._memory_reader(name)}
            if self.kernel_affinity:
                entry['kernel_vcpu_affinity'] = self._affinity(name)
            domains.append(entry)
        return {'version': 1, 'capabilities': caps, 'domains': domains}

    def vcpu_stats(self):
        """Every running guest's cumulative vCPU counters, one call.

        Returns (monotonic time of the reading, {uuid: {'name': name,
        'vcpus': {index: {'time': ns, 'delay': ns}}}}): the sample
        ``steal.rates`` takes."""
        return self._with_reconnect(self._vcpu_stats)

    def vcpu_counts(self):
        """{uuid: online vCPUs} of every running guest (no event tells of
        a vCPU hot-plug): a listing and one call a guest, none of which
        reaches qemu."""
        return self._with_reconnect(self._vcpu_counts)

    def _vcpu_counts(self):
        conn = self._connection()
        # vcpusFlags(live) reads libvirt's live definition: no job, no
        # monitor. getAllDomainStats' vCPU group, one call, asks every
        # guest's qemu monitor in turn instead (4 idle guests here: 41.6
        # ms a poll against 1.1 ms; benchmarks/poll_cost.py), every
        # second of every host.
        counts = {}
        for dom in self._call('read', 'listAllDomains', conn.listAllDomains,
                              libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            try:
                counts[dom.UUIDString()] = int(self._call(
                    'read', 'vcpusFlags', dom.vcpusFlags,
                    libvirt.VIR_DOMAIN_AFFECT_LIVE))
            except libvirt.libvirtError as exc:
                if _code(exc) not in GONE:
                    raise
                # ended since the listing: nothing to bind
        return counts

    def _vcpu_stats(self):
        conn = self._connection()
        records = self._call(
            'read', 'getAllDomainStats', conn.getAllDomainStats,
            libvirt.VIR_DOMAIN_STATS_VCPU | libvirt.VIR_DOMAIN_STATS_STATE,
            libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE)
        taken = _now()
        sample = {}
        for dom, stats in records:
            name = dom.name()  # local: no call to the daemon
            vcpus, complete = {}, True
            for index in range(int(stats.get('vcpu.current', 0) or 0)):
                t = stats.get('vcpu.%d.time' % index)
                d = stats.get('vcpu.%d.delay' % index)
                if t is None or d is None:
                    complete = False
                    break
                vcpus[index] = {'time': int(t), 'delay': int(d)}
            if not complete:
                vcpus = self._schedstat(name)
            sample[dom.UUIDString()] = {'name': name, 'vcpus': vcpus}
        return taken, sample

    def _proven(self, name, reader):
        """``reader(pid)`` of the guest's qemu, or None: no pid, or no
        proof that the pid is its qemu here (``qemuproof``)."""
        pid = qemu_pid(name, self.run_dir)
        if not pid:
            return None
        return self.proof.read(name, pid, reader)

    def _schedstat(self, name):
        found = self._proven(name, qemuproc.vcpu_schedstat) or {}
        return {v: {'time': t, 'delay': d} for v, (t, d) in
                sorted(found.items())}

    def _memory_from_proc(self, name):
        return self._proven(name, lambda pid: memplace.memory_by_node(
            pid, fallback=read_memory_by_node)) or {}

    def _affinity(self, name):
        found = self._proven(name, qemuproc.vcpu_affinity) or {}
        return {str(v): cpuset.format(cpus) for v, cpus in
                sorted(found.items())}

    def _cpumap(self, cpus):
        if self._ncpus is None:
            import xml.etree.ElementTree as ET  # noqa: S405 - libvirt's XML
            root = ET.fromstring(self.capabilities())  # noqa: S314
            ids = [int(c.get('id')) for c in root.iter('cpu')
                   if (c.get('id') or '').isdigit()]
            self._ncpus = max(ids) + 1
        return tuple(i in cpus for i in range(self._ncpus))

    # -- writing --------------------------------------------------------

    def apply(self, changes):
        """Write ``changes`` (``plan.PinChange``); never raises for a
        libvirt fault: what could not be written is in ``skipped``."""
        result = ApplyResult([], [], [], set())
        by_guest = collections.OrderedDict()
        for change in changes:
            if change.kind == 'numa' and not self.set_home_node:
                continue
            by_guest.setdefault(change.uuid, []).append(change)
        pending = list(by_guest.items())
        if not pending:
            return result
        try:
            held = self._with_reconnect(lambda: self._held(by_guest))
        except LibvirtTimeout as exc:
            self._stop_writes(result, pending, exc)
            return result
        except libvirt.libvirtError as exc:
            LOG.warning('state of the paused guests not read (%s); a '
                        'write may wait for a job of libvirt\'s', exc)
            held = {}
        for n, (uuid, group) in enumerate(pending):
            if uuid in held:
                # Its event (or the operation's hook) asks for the pass
                # that writes it.
                result.held.add(uuid)
                self._skip(result, group, group[0].name,
                           'guest %s: written once libvirt\'s job on it '
                           'ends' % held[uuid], log=LOG.debug)
                continue
            try:
                self._with_reconnect(
                    lambda u=uuid, g=group: self._apply_guest(u, g, result))
            except LibvirtTimeout as exc:
                self._stop_writes(result, pending[n:], exc)
                break
            except libvirt.libvirtError as exc:
                done = set(map(id, result.applied))
                for change in group:
                    if id(change) not in done:
                        result.skipped.append((change, str(exc)))
                LOG.warning('guest %s: pins not written: %s',
                            group[0].name, exc)
        return result

    def _stop_writes(self, result, pending, exc):
        """No more writes this pass: what is left is skipped."""
        done = set(map(id, result.applied))
        for _, rest in pending:
            result.skipped.extend((c, 'not written: %s' % exc)
                                  for c in rest if id(c) not in done)
        result.error.append(str(exc))
        LOG.error('pin writes stopped: %s', exc)

    def _held(self, uuids):
        """{uuid: why} of the domains among ``uuids`` that libvirt holds
        paused for one of its long jobs (``HELD``): the state of every
        paused domain, in one call."""
        records = self._call(
            'read', 'getAllDomainStats',
            self._connection().getAllDomainStats,
            libvirt.VIR_DOMAIN_STATS_STATE,
            libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_PAUSED)
        held = {}
        for dom, stats in records:
            uuid = dom.UUIDString()  # local: no call to the daemon
            reason = stats.get('state.reason')
            if uuid in uuids and reason in HELD and \
                    stats.get('state.state') == libvirt.VIR_DOMAIN_PAUSED:
                held[uuid] = HELD[reason]
        return held

    def _domain(self, uuid):
        """The domain object to write to: the listing's, while its
        connection is the open one; else looked up."""
        conn = self._connection()
        listed_conn, listed = self._listed
        dom = listed.get(uuid) if listed_conn is conn else None
        if dom is None:
            dom = self._call('read', 'lookupByUUIDString',
                             conn.lookupByUUIDString, uuid)
        return dom

    def _apply_guest(self, uuid, changes, result):
        name = changes[0].name
        done = {id(c) for c in result.applied}
        todo = [c for c in changes if id(c) not in done]
        try:
            dom = self._domain(uuid)
        except libvirt.libvirtError as exc:
            if _code(exc) in GONE:
                self._skip(result, todo, name, 'guest went away')
                return
            raise
        for i, change in enumerate(todo):
            try:
                self._write(dom, change)
            except libvirt.libvirtError as exc:
                if _code(exc) in GONE:
                    self._skip(result, todo[i:], name,
                               'guest went away or stopped')
                    return
                if _code(exc) in BUSY:
                    self._skip(result, [change], name,
                               'guest busy in another job')
                    continue
                raise
            result.applied.append(change)

    def _skip(self, result, changes, name, why, log=LOG.info):
        log('guest %s: %d pin change(s) skipped: %s', name, len(changes),
            why)
        result.skipped.extend((c, why) for c in changes)

    def _write(self, dom, change):
        live = libvirt.VIR_DOMAIN_AFFECT_LIVE
        if change.kind == 'vcpu':
            call = ('pinVcpuFlags', dom.pinVcpuFlags, change.index,
                    self._cpumap(change.new), live)
        elif change.kind == 'emulator':
            call = ('pinEmulator', dom.pinEmulator, self._cpumap(change.new),
                    live)
        elif change.kind == 'iothread':
            call = ('pinIOThread', dom.pinIOThread, change.index,
                    self._cpumap(change.new), live)
        elif change.kind == 'numa':
            call = ('setNumaParameters', dom.setNumaParameters,
                    {libvirt.VIR_DOMAIN_NUMA_NODESET:
                     cpuset.format(change.new)}, live)
        else:
            raise ValueError('unknown change kind %r' % change.kind)
        api, func, args = call[0], call[1], call[2:]
        for attempt in range(self.busy_retries + 1):
            try:
                return self._call('write', api, func, *args)
            except libvirt.libvirtError as exc:
                if _code(exc) not in BUSY or attempt == self.busy_retries:
                    raise
                LOG.info('guest %s busy; retrying %s', change.name, api)
                time.sleep(self.busy_retry_delay)
