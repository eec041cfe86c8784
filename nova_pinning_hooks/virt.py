"""The libvirt adapter: the only module of the package that imports libvirt.

``Host.read_snapshot`` reads the live host as a snapshot dict (the format
``nova-pinning plan`` reads); ``Host.apply`` writes a list of
``plan.PinChange``. Tests swap libvirt for a fake at this one place
(``tests/fixtures.py``).

Invariants:

* Reads: one capabilities call per connection (cached), one listing of
  the active domains and one ``XMLDesc`` per domain per pass. The memory
  placement of a guest comes from its qemu process (``numa_maps``), not
  from libvirt.
* Writes: one call per change, with ``VIR_DOMAIN_AFFECT_LIVE`` only; the
  persistent definition is never touched, so nova's own view of the
  domain stays what nova wrote.
* Faults are normal: a domain that vanished or stopped is skipped, a busy
  one retried a bounded number of times, a lost connection reopened once.
  Every skip is logged with the guest's name; ``apply`` never raises for
  a libvirt fault.
* ``calls`` counts every libvirt call made, as ``read`` and ``write``.
  (libvirt-python itself also asks for the host CPU count inside each pin
  call; that hidden call is not counted.)
"""

import collections
import os
import time
import typing

import libvirt
from oslo_log import log as logging

from nova_pinning_hooks import cpuset

LOG = logging.getLogger(__name__)

RUN_DIR = '/run/libvirt/qemu'
GONE = (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_OPERATION_INVALID)
BUSY = (libvirt.VIR_ERR_OPERATION_TIMEOUT,)


class ApplyResult(typing.NamedTuple):
    applied: list  # PinChange
    skipped: list  # (PinChange or guest name, reason)


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
    try:
        with open(os.path.join(run_dir, name + '.pid'),
                  encoding='ascii') as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


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
        self.run_dir = run_dir
        self._memory_reader = memory_reader or self._memory_from_proc
        self._conn = None
        self._caps = None
        self._ncpus = None
        self.calls = collections.Counter()

    # -- connection -----------------------------------------------------

    def _connection(self):
        if self._conn is not None and self._alive():
            return self._conn
        if self._conn is not None:
            LOG.warning('libvirt connection to %s lost; reopening', self.uri)
            self._drop()
        self._conn = self._call('read', 'open', libvirt.open, self.uri)
        return self._conn

    def _alive(self):
        try:
            return bool(self._conn.isAlive())
        except libvirt.libvirtError:
            return False

    def _drop(self):
        conn, self._conn = self._conn, None
        try:
            conn.close()
        except Exception:  # already dead: nothing to release
            LOG.debug('closing a dead libvirt connection failed')

    def close(self):
        if self._conn is not None:
            self._drop()

    def _call(self, kind, api, func, *args):
        self.calls[kind] += 1
        self.calls[api] += 1
        return func(*args)

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

    def read_snapshot(self):
        """The live host: capabilities and the active domains."""
        return self._with_reconnect(self._read)

    def _read(self):
        conn = self._connection()
        caps = self.capabilities()
        doms = self._call('read', 'listAllDomains', conn.listAllDomains,
                          libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        domains = []
        for dom in doms:
            name = dom.name()  # local: no call to the daemon
            try:
                xml = self._call('read', 'XMLDesc', dom.XMLDesc, 0)
            except libvirt.libvirtError as exc:
                if _code(exc) in GONE:
                    LOG.info('guest %s went away while being read; '
                             'skipped', name)
                    continue
                raise
            domains.append({'xml': xml, 'active': True,
                            'memory_by_node_kib': self._memory_reader(name)})
        return {'version': 1, 'capabilities': caps, 'domains': domains}

    def _memory_from_proc(self, name):
        pid = qemu_pid(name, self.run_dir)
        return read_memory_by_node(pid) if pid else {}

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
        result = ApplyResult([], [])
        by_guest = collections.OrderedDict()
        for change in changes:
            if change.kind == 'numa' and not self.set_home_node:
                continue
            by_guest.setdefault(change.uuid, []).append(change)
        for uuid, group in by_guest.items():
            try:
                self._with_reconnect(
                    lambda u=uuid, g=group: self._apply_guest(u, g, result))
            except libvirt.libvirtError as exc:
                done = set(map(id, result.applied))
                for change in group:
                    if id(change) not in done:
                        result.skipped.append((change, str(exc)))
                LOG.warning('guest %s: pins not written: %s',
                            group[0].name, exc)
        return result

    def _apply_guest(self, uuid, changes, result):
        name = changes[0].name
        done = {id(c) for c in result.applied}
        todo = [c for c in changes if id(c) not in done]
        try:
            dom = self._call('read', 'lookupByUUIDString',
                             self._connection().lookupByUUIDString, uuid)
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

    def _skip(self, result, changes, name, why):
        LOG.info('guest %s: %d pin change(s) skipped: %s', name,
                 len(changes), why)
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
