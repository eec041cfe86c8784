"""A fake ``libvirt`` module: just what nova-pinning-hooks calls, plus
what tests need to check and break it.

In the spirit of nova's tests/fixtures/libvirt.py, which has no pinning
calls: a host (capabilities XML for any topology) holds domains whose
vCPU, emulator and I/O thread pins change when the pin calls are made and
show in ``XMLDesc``, ``vcpuPinInfo`` and ``emulatorPinInfo``. Every call is
counted per method; faults can be injected (a domain vanishing between the
listing and the pin, a busy domain, a domain still in its start job, a
connection closing). Use it through
``tests.fixtures.FakeLibvirtFixture``, which patches it in at one place.
"""

import collections
import re
import threading
import time

# Values as in libvirt's headers.
VIR_DOMAIN_AFFECT_CURRENT = 0
VIR_DOMAIN_AFFECT_LIVE = 1
VIR_DOMAIN_AFFECT_CONFIG = 2
VIR_CONNECT_LIST_DOMAINS_ACTIVE = 1
VIR_CONNECT_LIST_DOMAINS_INACTIVE = 2
VIR_DOMAIN_XML_INACTIVE = 2
VIR_DOMAIN_NUMA_NODESET = 'numa_nodeset'
VIR_DOMAIN_NUMA_MODE = 'numa_mode'
VIR_DOMAIN_NUMATUNE_MEM_STRICT = 0
VIR_DOMAIN_NUMATUNE_MEM_RESTRICTIVE = 3
_NUMA_MODES = {VIR_DOMAIN_NUMATUNE_MEM_STRICT: 'strict', 1: 'preferred',
               2: 'interleave', VIR_DOMAIN_NUMATUNE_MEM_RESTRICTIVE:
               'restrictive'}
VIR_DOMAIN_RUNNING = 1
VIR_DOMAIN_RUNNING_BOOTED = 1
VIR_DOMAIN_PAUSED = 3
VIR_DOMAIN_PAUSED_USER = 1
VIR_DOMAIN_PAUSED_MIGRATION = 2
VIR_DOMAIN_PAUSED_SAVE = 3
VIR_DOMAIN_PAUSED_DUMP = 4
VIR_DOMAIN_PAUSED_SNAPSHOT = 9
VIR_DOMAIN_PAUSED_STARTING_UP = 11
VIR_DOMAIN_STATS_STATE = 1
VIR_DOMAIN_STATS_VCPU = 8
VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE = 1
VIR_CONNECT_GET_ALL_DOMAINS_STATS_PAUSED = 32
VIR_DOMAIN_SHUTOFF = 5
VIR_DOMAIN_JOB_NONE = 0
VIR_DOMAIN_JOB_BOUNDED = 1
VIR_DOMAIN_JOB_UNBOUNDED = 2
VIR_DOMAIN_JOB_COMPLETED = 3
VIR_DOMAIN_JOB_OPERATION_UNKNOWN = 0
VIR_DOMAIN_JOB_OPERATION_START = 1
VIR_DOMAIN_JOB_OPERATION_SAVE = 2
VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN = 4
VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT = 5
VIR_DOMAIN_JOB_OPERATION_SNAPSHOT = 6
VIR_DOMAIN_JOB_OPERATION_DUMP = 8
VIR_DOMAIN_JOB_OPERATION_BACKUP = 9

VIR_ERR_INTERNAL_ERROR = 1
VIR_ERR_SYSTEM_ERROR = 38
VIR_ERR_NO_DOMAIN = 42
VIR_ERR_INVALID_ARG = 8
VIR_ERR_OPERATION_INVALID = 55
VIR_ERR_OPERATION_TIMEOUT = 68
VIR_ERR_OPERATION_UNSUPPORTED = 84
VIR_FROM_QEMU = 10
VIR_FROM_RPC = 7
VIR_FROM_DOMAIN = 20

VIR_DOMAIN_EVENT_ID_LIFECYCLE = 0
VIR_DOMAIN_EVENT_ID_REBOOT = 1
VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED = 15
VIR_DOMAIN_EVENT_ID_TUNABLE = 17
VIR_DOMAIN_EVENT_ID_DEVICE_ADDED = 19
VIR_DOMAIN_EVENT_ID_JOB_COMPLETED = 21
VIR_DOMAIN_EVENT_ID_METADATA_CHANGE = 23
VIR_CONNECT_CLOSE_REASON_EOF = 1


def virEventRegisterDefaultImpl():  # noqa: N802 - libvirt's name
    return 0


error_handler = None  # what registerErrorHandler was given last


def getVersion():  # noqa: N802 - libvirt's name
    """The library's version, as libvirt 9.0.0 answers (local)."""
    return 9000000


def registerErrorHandler(f, ctx):  # noqa: N802 - libvirt's name
    global error_handler
    error_handler = (f, ctx)
    return 1


def virEventRunDefaultImpl():  # noqa: N802
    # The fake delivers events synchronously (FakeHost.emit); the loop
    # thread has nothing to do.
    time.sleep(0.05)
    return 0


class libvirtError(Exception):  # noqa: N801 - libvirt's name
    def __init__(self, msg, code=VIR_ERR_INTERNAL_ERROR,
                 domain=VIR_FROM_QEMU):
        super().__init__(msg)
        self._code, self._domain = code, domain

    def get_error_code(self):
        return self._code

    def get_error_domain(self):
        return self._domain

    def get_error_message(self):
        return str(self)


class FakeHost:
    """The hypervisor's state, shared by every connection opened to it."""

    def __init__(self, capabilities):
        self.capabilities = capabilities
        self.ncpus = 1 + max(int(c) for c in
                             re.findall(r"<cpu id='(\d+)'", capabilities))
        self.domains = collections.OrderedDict()  # uuid -> FakeDomain
        self.calls = collections.Counter()
        self.lock = threading.Lock()
        self.down = False  # the daemon is not answering
        self.connections = []
        self.auths = []  # (credential types, callback, flags) of openAuth
        # Fault injection, by guest name.
        self.vanish_on_pin = set()  # destroyed just before its first pin
        self.busy = collections.Counter()  # pin calls to fail as busy
        # A hung daemon: calls of these methods block until the event is
        # set (method name -> threading.Event), after the Nth call if
        # hang_after[method] = N.
        self.hang = {}
        self.hang_after = collections.Counter()
        # Seconds each call to the daemon takes (a model of RPC latency).
        self.latency = 0.0
        self.next_id = 1
        # Pin writes emit a tunable event, as libvirt's do.
        self.auto_events = True

    def add_domain(self, name, vcpus, uuid=None, xml=None, active=True,
                   memory_by_node_kib=None, starting=False,
                   persistent=True):
        """A domain; ``starting``: still in its start job (listed as
        active, paused for "starting up", pin calls wait for the job) until
        its ``finish_start``. Its persistent definition is ``xml`` as
        given (pins in it are nova's: defined, not live-only);
        ``persistent=False``: a transient domain, which has none."""
        if uuid is None and xml is not None:
            uuid = re.search(r'<uuid>([^<]+)</uuid>', xml).group(1)
        uuid = uuid or '00000000-0000-4000-8000-%012d' % (
            len(self.domains) + 1)
        if xml is None:
            xml = ("<domain type='kvm'><name>%s</name><uuid>%s</uuid>"
                   "<memory unit='KiB'>65536</memory><vcpu>%d</vcpu>"
                   "<devices/></domain>" % (name, uuid, vcpus))
        dom = FakeDomain(self, name, uuid, vcpus, xml, active,
                         memory_by_node_kib or {'0': 65536})
        dom.persistent = persistent
        self.domains[uuid] = dom
        if starting:
            dom.state_reason = (VIR_DOMAIN_PAUSED,
                                VIR_DOMAIN_PAUSED_STARTING_UP)
            dom.job = threading.Event()
        else:
            self.emit(dom, 'LIFECYCLE', 0, 0)  # started
        return dom

    def emit(self, dom, event, *args):
        """Deliver a domain event (``'TUNABLE'``, ...) to every open
        connection's callbacks for it, in the caller's thread (libvirt's
        event thread would call them)."""
        event_id = globals()['VIR_DOMAIN_EVENT_ID_' + event]
        for conn in list(self.connections):
            for cb_event, cb_dom, cb, opaque in list(
                    conn.callbacks.values()):
                if conn.closed or cb_event != event_id or \
                        cb_dom not in (None, dom):
                    continue
                cb(conn, dom, *args, opaque)

    def restart_daemon(self):
        """libvirtd restarted: connections close (their close callbacks
        run), domains keep running."""
        for conn in list(self.connections):
            if not conn.closed:
                conn.closed = True
                if conn.close_callback is not None:
                    cb, opaque = conn.close_callback
                    cb(conn, VIR_CONNECT_CLOSE_REASON_EOF, opaque)

    def by_name(self, name):
        for dom in self.domains.values():
            if dom.name() == name:
                return dom
        raise KeyError(name)

    def writes(self):
        return sum(self.calls[m] for m in ('pinVcpuFlags', 'pinEmulator',
                                           'pinIOThread',
                                           'setNumaParameters'))

    def count(self, method):
        if self.latency:
            time.sleep(self.latency)
        with self.lock:
            self.calls[method] += 1
            if self.down:
                raise libvirtError('Cannot write data: Broken pipe',
                                   VIR_ERR_SYSTEM_ERROR, VIR_FROM_RPC)
            hang = self.hang.get(method)
            if hang is not None and self.hang_after[method] > 0:
                self.hang_after[method] -= 1
                hang = None
        if hang is not None:
            hang.wait()


class FakeDomain:

    def __init__(self, host, name, uuid, vcpus, xml, active, memory):
        self._host = host
        self._name = name
        self._uuid = uuid
        self.vcpus = vcpus
        self.base_xml = re.sub(r'<cputune>.*?</cputune>', '', xml,
                               flags=re.S)
        self.defined_xml = xml  # the persistent definition
        self.persistent = True
        self.active = active
        self.memory_by_node_kib = memory
        # its qemu started with -incoming (migrated in, restored)
        self.arrived = False
        # every nodeset written live, in order (setNumaParameters)
        self.numa_history = []
        self.vcpu_pins = {}  # vcpu -> tuple of cpus
        self.emulator_pin = None
        self.iothread_pins = {}
        self.numa_nodeset = None
        self.numa_mode = None  # <numatune>'s mode: none until written
        # Cumulative vCPU counters (ns) for getAllDomainStats: tests set
        # them; report_delay=False is a libvirt without vcpu.N.delay.
        self.vcpu_time = collections.Counter()
        self.vcpu_delay = collections.Counter()
        self.report_delay = True
        # (state, reason), as getAllDomainStats's state.* report them.
        self.state_reason = (VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_BOOTED)
        # A job of libvirt's holding the domain (its start, a migration):
        # calls that need a job of their own (pins) wait until it is set.
        self.job = None
        # What jobStats reports of it: (type, operation); a running
        # domain's job (``start_job``) shows only there.
        self.job_stats = (VIR_DOMAIN_JOB_NONE,
                          VIR_DOMAIN_JOB_OPERATION_UNKNOWN)
        self.id = host.next_id
        host.next_id += 1
        for vcpu, cpus in re.findall(
                r"<vcpupin vcpu='(\d+)' cpuset='([^']+)'", xml):
            self.vcpu_pins[int(vcpu)] = _expand(cpus)

    # Local accessors: no call to the daemon in real libvirt either.
    def name(self):
        return self._name

    def UUIDString(self):  # noqa: N802
        return self._uuid

    def ID(self):  # noqa: N802
        return self.id if self.active else -1

    def _tuned(self):
        if self._host.auto_events:
            self._host.emit(self, 'TUNABLE', {})

    def _call(self, method):
        self._host.count(method)
        if self._uuid not in self._host.domains:
            raise libvirtError('Domain not found: no domain with matching '
                               'uuid', VIR_ERR_NO_DOMAIN)

    def _live(self, method):
        self._call(method)
        if not self.active:
            raise libvirtError('Requested operation is not valid: domain '
                               'is not running', VIR_ERR_OPERATION_INVALID)

    def finish_start(self):
        """The start job ends: running, pins no longer wait, and the
        started event goes out (as libvirt's createXML does)."""
        self.state_reason = (VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_BOOTED)
        job, self.job = self.job, None
        if job is not None:
            job.set()
        self._host.emit(self, 'LIFECYCLE', 0, 0)  # started

    def start_job(self, operation=VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT,
                  kind=VIR_DOMAIN_JOB_UNBOUNDED):
        """A job of libvirt's holds the domain while it keeps running
        (the source of a live migration until its switch-over): pin calls
        wait until ``end_job``; ``jobStats`` tells of it (``kind``
        completed: qemu's part is done, libvirt's job still holds it)."""
        self.job = threading.Event()
        self.job_stats = (kind, operation)

    def end_job(self):
        """The job ends, and its completion event goes out."""
        self.job_stats = (VIR_DOMAIN_JOB_NONE,
                          VIR_DOMAIN_JOB_OPERATION_UNKNOWN)
        job, self.job = self.job, None
        if job is not None:
            job.set()
        self._host.emit(self, 'JOB_COMPLETED', {})

    def jobStats(self, flags=0):  # noqa: N802
        """The current job, as libvirt-python's dict (a query job in
        libvirt: runs beside a migration; an incoming migration's domain
        refuses it)."""
        self._live('jobStats')
        kind, operation = self.job_stats
        if operation == VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN:
            raise libvirtError('Operation not supported: migration '
                               'statistics are available only on the source '
                               'host', VIR_ERR_OPERATION_UNSUPPORTED)
        if kind == VIR_DOMAIN_JOB_NONE:
            return {'type': kind}
        return {'type': kind, 'operation': operation, 'time_elapsed': 1}

    def isActive(self):  # noqa: N802
        self._call('isActive')
        return int(self.active)

    def vcpusFlags(self, flags=0):  # noqa: N802
        """Online vCPUs of the live definition (libvirt: no job, no
        monitor for AFFECT_LIVE)."""
        self._live('vcpusFlags')
        if flags != VIR_DOMAIN_AFFECT_LIVE:
            raise libvirtError('test expects AFFECT_LIVE only, got %r'
                               % flags, VIR_ERR_INVALID_ARG)
        return self.vcpus

    def isPersistent(self):  # noqa: N802
        self._call('isPersistent')
        return int(self.persistent)

    def XMLDesc(self, flags=0):  # noqa: N802
        """The live XML; with VIR_DOMAIN_XML_INACTIVE the persistent
        definition (a transient domain's: its live XML, as libvirt's
        qemu driver answers)."""
        self._call('XMLDesc')
        if flags not in (0, VIR_DOMAIN_XML_INACTIVE):
            raise libvirtError('test expects flags 0 or INACTIVE, got %r'
                               % flags, VIR_ERR_INVALID_ARG)
        if flags == VIR_DOMAIN_XML_INACTIVE and self.persistent:
            return self.defined_xml
        tune = ''.join("<vcpupin vcpu='%d' cpuset='%s'/>" % (v, _fmt(c))
                       for v, c in sorted(self.vcpu_pins.items()))
        if self.emulator_pin is not None:
            tune += "<emulatorpin cpuset='%s'/>" % _fmt(self.emulator_pin)
        for t, c in sorted(self.iothread_pins.items()):
            tune += "<iothreadpin iothread='%d' cpuset='%s'/>" % (t, _fmt(c))
        extra = '<cputune>%s</cputune>' % tune if tune else ''
        if self.numa_nodeset is not None:
            extra += ("<numatune><memory mode='%s' nodeset='%s'/>"
                      "</numatune>" % (self.numa_mode, self.numa_nodeset))
        xml = self.base_xml
        cut = xml.find('<devices')
        cut = cut if cut >= 0 else xml.rindex('</domain>')
        return xml[:cut] + extra + xml[cut:]

    def _pin_faults(self, method):
        self._live(method)
        job = self.job
        if job is not None:
            job.wait()  # libvirt's domain job: the pin waits its turn
        if self._name in self._host.vanish_on_pin:
            self._host.vanish_on_pin.discard(self._name)
            self.destroy()
            raise libvirtError('Domain not found', VIR_ERR_NO_DOMAIN)
        if self._host.busy[self._name] > 0:
            self._host.busy[self._name] -= 1
            raise libvirtError('Timed out during operation: cannot acquire '
                               'state change lock', VIR_ERR_OPERATION_TIMEOUT)

    def _cpus(self, cpumap, flags):
        if flags != VIR_DOMAIN_AFFECT_LIVE:
            raise libvirtError('test expects AFFECT_LIVE only, got %r'
                               % flags, VIR_ERR_INVALID_ARG)
        if len(cpumap) > self._host.ncpus:
            raise libvirtError('cpumap longer than the host has CPUs',
                               VIR_ERR_INVALID_ARG)
        cpus = tuple(i for i, used in enumerate(cpumap) if used)
        if not cpus:
            raise libvirtError('empty cpumap', VIR_ERR_INVALID_ARG)
        return cpus

    def pinVcpuFlags(self, vcpu, cpumap, flags):  # noqa: N802
        self._pin_faults('pinVcpuFlags')
        if not 0 <= vcpu < self.vcpus:
            raise libvirtError('vcpu %d is out of range of live cpu count'
                               % vcpu, VIR_ERR_INVALID_ARG)
        self.vcpu_pins[vcpu] = self._cpus(cpumap, flags)
        self._tuned()
        return 0

    def pinEmulator(self, cpumap, flags):  # noqa: N802
        self._pin_faults('pinEmulator')
        self.emulator_pin = self._cpus(cpumap, flags)
        self._tuned()
        return 0

    def pinIOThread(self, iothread, cpumap, flags):  # noqa: N802
        self._pin_faults('pinIOThread')
        self.iothread_pins[iothread] = self._cpus(cpumap, flags)
        self._tuned()
        return 0

    def setNumaParameters(self, params, flags):  # noqa: N802
        self._pin_faults('setNumaParameters')
        # libvirt's rules for a running guest (qemuDomainSetNumaParameters,
        # libvirt 7.3 to 11.3): the mode never changes; a nodeset changes
        # only in restrictive mode, or once while no <numatune> is set
        # (which makes it strict unless a mode is given).
        mode = _NUMA_MODES[params[VIR_DOMAIN_NUMA_MODE]] \
            if VIR_DOMAIN_NUMA_MODE in params else None
        nodeset = params[VIR_DOMAIN_NUMA_NODESET]
        if mode and self.numa_mode and mode != self.numa_mode:
            raise libvirtError("Requested operation is not valid: can't "
                               "change numatune mode for running domain",
                               VIR_ERR_OPERATION_INVALID)
        if mode == 'strict' and nodeset != self.numa_nodeset:
            raise libvirtError("Requested operation is not valid: can't "
                               "change nodeset for strict mode for "
                               "running domain", VIR_ERR_OPERATION_INVALID)
        if self.numa_mode not in (None, 'restrictive'):
            raise libvirtError('Requested operation is not valid: change '
                               'of nodeset for running domain requires '
                               'restrictive numa mode',
                               VIR_ERR_OPERATION_INVALID)
        self.numa_mode = mode or self.numa_mode or 'strict'
        self.numa_nodeset = nodeset
        self.numa_history.append(self.numa_nodeset)
        self._tuned()
        return 0

    def vcpuPinInfo(self, flags):  # noqa: N802
        self._call('vcpuPinInfo')
        every = tuple(range(self._host.ncpus))
        return [tuple(i in self.vcpu_pins.get(v, every)
                      for i in range(self._host.ncpus))
                for v in range(self.vcpus)]

    def emulatorPinInfo(self, flags):  # noqa: N802
        self._call('emulatorPinInfo')
        cpus = self.emulator_pin or tuple(range(self._host.ncpus))
        return tuple(i in cpus for i in range(self._host.ncpus))

    def destroy(self):
        self._host.domains.pop(self._uuid, None)
        self.active = False
        if self.job is not None:
            self.job.set()  # a waiting pin then finds the domain gone
        self._host.emit(self, 'LIFECYCLE', 5, 0)  # stopped
        return 0


class FakeConnection:

    def __init__(self, host, uri):
        self._host = host
        self.uri = uri
        self.closed = False
        self.callbacks = {}  # id -> (event id, domain or None, cb, opaque)
        self.close_callback = None
        self.keepalive = None

    def _call(self, method):
        if self.closed:
            raise libvirtError('internal error: client socket is closed',
                               VIR_ERR_INTERNAL_ERROR, VIR_FROM_RPC)
        self._host.count(method)

    def isAlive(self):  # noqa: N802 - local, like libvirt's
        return int(not self.closed and not self._host.down)

    def close(self):
        self.closed = True
        return 0

    def domainEventRegisterAny(self, dom, event_id, cb, opaque):  # noqa: N802
        self._call('domainEventRegisterAny')
        callback_id = len(self.callbacks) + 1
        self.callbacks[callback_id] = (event_id, dom, cb, opaque)
        return callback_id

    def domainEventDeregisterAny(self, callback_id):  # noqa: N802
        self._call('domainEventDeregisterAny')
        del self.callbacks[callback_id]
        return 0

    def registerCloseCallback(self, cb, opaque):  # noqa: N802
        self._call('registerCloseCallback')
        self.close_callback = (cb, opaque)
        return 0

    def unregisterCloseCallback(self):  # noqa: N802
        self._call('unregisterCloseCallback')
        self.close_callback = None
        return 0

    def setKeepAlive(self, interval, count):  # noqa: N802
        self._call('setKeepAlive')
        self.keepalive = (interval, count)
        return 0

    def getCapabilities(self):  # noqa: N802
        self._call('getCapabilities')
        return self._host.capabilities

    def listAllDomains(self, flags=0):  # noqa: N802
        self._call('listAllDomains')
        doms = list(self._host.domains.values())
        if flags & VIR_CONNECT_LIST_DOMAINS_ACTIVE:
            doms = [d for d in doms if d.active]
        return doms

    def getAllDomainStats(self, stats=0, flags=0):  # noqa: N802
        self._call('getAllDomainStats')
        if not stats & (VIR_DOMAIN_STATS_VCPU | VIR_DOMAIN_STATS_STATE):
            raise libvirtError('test expects the state or vCPU stats',
                               VIR_ERR_INVALID_ARG)
        records = []
        for dom in self._host.domains.values():
            if flags & VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE and \
                    not dom.active:
                continue
            if flags & VIR_CONNECT_GET_ALL_DOMAINS_STATS_PAUSED and \
                    (not dom.active or
                     dom.state_reason[0] != VIR_DOMAIN_PAUSED):
                continue
            record = {'state.state': dom.state_reason[0],
                      'state.reason': dom.state_reason[1]}
            records.append((dom, record))
            if not stats & VIR_DOMAIN_STATS_VCPU:
                continue
            record.update({'vcpu.current': dom.vcpus,
                           'vcpu.maximum': dom.vcpus})
            for v in range(dom.vcpus):
                record['vcpu.%d.state' % v] = 1
                record['vcpu.%d.time' % v] = dom.vcpu_time[v]
                if dom.report_delay:
                    record['vcpu.%d.delay' % v] = dom.vcpu_delay[v]
        return records

    def lookupByUUIDString(self, uuid):  # noqa: N802
        self._call('lookupByUUIDString')
        try:
            return self._host.domains[uuid]
        except KeyError:
            raise libvirtError('Domain not found: no domain with matching '
                               'uuid %r' % uuid, VIR_ERR_NO_DOMAIN) from None


_HOSTS = {}


def register(uri, host):
    _HOSTS[uri] = host


def unregister(uri):
    _HOSTS.pop(uri, None)


def open(uri):  # noqa: A001 - libvirt's name
    host = _HOSTS.get(uri)
    if host is None:
        raise libvirtError('no fake host registered for %s' % uri,
                           VIR_ERR_SYSTEM_ERROR, VIR_FROM_RPC)
    host.count('open')
    conn = FakeConnection(host, uri)
    host.connections.append(conn)
    return conn


VIR_CRED_USERNAME = 1
VIR_CRED_AUTHNAME = 2
VIR_CRED_LANGUAGE = 3
VIR_CRED_CNONCE = 4
VIR_CRED_PASSPHRASE = 5
VIR_CRED_ECHOPROMPT = 6
VIR_CRED_NOECHOPROMPT = 7
VIR_CRED_REALM = 8
VIR_CRED_EXTERNAL = 9


def openAuth(uri, auth, flags=0):  # noqa: N802 - libvirt's name
    """libvirt's: ``auth`` is [credential types, callback, opaque]; the
    host records it (``auths``), as a test of what the package offers."""
    credtypes, callback, _opaque = auth
    host = _HOSTS.get(uri)
    if host is not None:
        host.auths.append((list(credtypes), callback, flags))
    return open(uri)


def drop_connections(host):
    """Simulate libvirtd restarting: every open connection is closed."""
    for conn in host.connections:
        conn.closed = True


def _expand(text):
    cpus = []
    for part in text.split(','):
        lo, _, hi = part.partition('-')
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(cpus)


def _fmt(cpus):
    return ','.join(str(c) for c in cpus)
