"""The libvirt adapter's reads: the live host as a snapshot, the
guests' vCPU counters and counts, and the guests still carrying live
pins (``Reader``, the part of ``virt.Host`` that reads).

Invariants:

* One capabilities call per connection (cached), one listing of the
  active domains and one ``XMLDesc`` per domain per pass. The memory
  placement of a guest comes from its qemu process's memory cgroup
  (``memplace``; ``numa_maps`` only as the fallback), not from libvirt.
* Incremental reads (``read_snapshot(model)``, ``model.HostModel``): one
  listing call, then ``XMLDesc``, memory placement and thread affinity
  only for the domains the model cannot vouch for. A connection opened
  anew invalidates the model (events may have been missed meanwhile).
* With ``kernel_affinity`` (the default), the live snapshot also carries
  each vCPU thread's affinity as the kernel enforces it
  (``qemuproc.vcpu_affinity``), so drift behind libvirt's back is seen.
* A qemu pid from libvirt is read through /proc only once proven to be
  that guest's qemu here (``qemuproof``: another PID namespace, such as
  kolla's nova_compute, numbers processes differently); without proof the
  guest's memory placement, affinity and schedstat are unknown ({}).
* Whether a guest arrived (its qemu started with ``-incoming``:
  ``qemuproc.arrived``) is read only for guests whose memory lies on
  more than one node, one small /proc read each; the entry says
  ``arrived`` only when it did (the policy homes such a guest).
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
* ``pinned_guests`` (``nova-pinning-status upgrade check``) compares
  each running guest's live XML with its persistent definition: two
  ``XMLDesc`` calls a guest, nothing written.
* A domain that went away between the listing and its read is skipped.

libvirt is reached through ``libvirtapi.libvirt`` at call time:
``libvirtapi`` stays the only module that imports it, and the one place
tests swap it. The connection is the ``virt.Host`` handed to ``Reader``;
this module does not import ``virt``.
"""

import collections
import os
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import migratexml
from nova_pinning_hooks.engine import snapshot as snapshot_mod
from nova_pinning_hooks.host import libvirtapi
from nova_pinning_hooks.host import memplace
from nova_pinning_hooks.host import model as model_mod
from nova_pinning_hooks.host import qemuproc
from nova_pinning_hooks.host import qemuproof
LOG = logging.getLogger(__name__)

_T = typing.TypeVar('_T')

# {uuid: {'name': name, 'vcpus': {index: {'time': ns, 'delay': ns}}}}
VcpuSample = dict[str, dict[str, typing.Any]]
# (monotonic time of the reading, the sample): ``vcpu_stats``
VcpuStats = tuple[float, VcpuSample]


class ReaderHost(libvirtapi.HostCalls, typing.Protocol):
    """What ``Reader`` uses of its ``virt.Host`` besides its calls."""
    model: typing.Optional[model_mod.HostModel]
    kernel_affinity: bool
    run_dir: str
    proof: qemuproof.Proof


def read_memory_by_node(pid: int, proc: str = '/proc') -> dict[str, int]:
    """KiB of a qemu process's anonymous (guest RAM) memory per NUMA node.

    Sums the ``N<node>=<pages>`` fields of ``/proc/PID/numa_maps`` for
    anonymous and huge-page mappings; file mappings (libraries) are left
    out. Returns {} when the process or the file is gone.
    """
    result: collections.Counter[int] = collections.Counter()
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


class Reader:
    """What ``virt.Host`` reads; uses its connection and bounded calls
    (``host.connection``, ``host.call``, ``host.with_reconnect``).
    ``memory_reader(name)``, if given, stands in for the guest's memory
    placement read from its qemu process."""

    def __init__(self, host: ReaderHost,
                 memory_reader: typing.Optional[
                     typing.Callable[[str], dict[str, int]]] = None
                 ) -> None:
        self.host = host
        self._memory_reader = memory_reader or self._memory_from_proc
        # the connection's capabilities, read once
        self._caps: typing.Optional[str] = None

    def capabilities(self) -> str:
        if self._caps is None:
            self._caps = self.host.with_reconnect(lambda: self.host.call(
                'read', 'getCapabilities',
                self.host.connection().getCapabilities))
        return self._caps

    def read_snapshot(self,
                      model: typing.Optional[model_mod.HostModel] = None
                      ) -> snapshot_mod.LiveSnapshot:
        """The live host: capabilities and the active domains. With a
        ``model.HostModel``, only what it cannot vouch for is read."""
        if model is None:
            return self.host.with_reconnect(self._read)
        self.host.model = model
        return self.host.with_reconnect(self._read_changed)

    def _read_changed(self) -> snapshot_mod.LiveSnapshot:
        conn = self.host.connection()  # may invalidate the model: first
        caps = self.capabilities()
        # set by read_snapshot, which alone calls this
        model = self.host.model
        assert model is not None
        everything, marked = model.take()
        try:
            doms = self.host.call(
                'read', 'listAllDomains', conn.listAllDomains,
                libvirtapi.libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
            # UUID, id and name are local to the domain object.
            listing = [(d.UUIDString(), d.ID(), d.name()) for d in doms]
            by_uuid = {entry[0]: (dom, entry)
                       for dom, entry in zip(doms, listing)}
            self.host.listed = (conn, {u: d for u, (d, _) in by_uuid.items()})
            for uuid in model.to_fetch(listing, everything, marked):
                dom, (_, dom_id, name) = by_uuid[uuid]
                xml = self._live_xml(dom, name)
                if xml is None:
                    model.forget(uuid)
                    continue
                memory, arrived = self._memory_and_arrival(name)
                model.store(uuid, dom_id, name, xml, memory,
                            self._affinity(name) if self.host.kernel_affinity
                            else None, arrived)
        except BaseException:
            model.give_back(everything, marked)
            raise
        domains = [d.entry() for d in model.domains(listing)]
        return snapshot_mod.LiveSnapshot(caps, domains)

    def _live_xml(self, dom: typing.Any, name: str,
                  flags: int = 0) -> typing.Optional[str]:
        """The domain's live XML (with ``flags``: as they say); None if
        it went away meanwhile."""
        try:
            xml: str = self.host.call('read', 'XMLDesc', dom.XMLDesc, flags)
            return xml
        except libvirtapi.libvirt.libvirtError as exc:
            if libvirtapi.code(exc) in libvirtapi.GONE:
                LOG.info('guest %s went away while being read; skipped',
                         name)
                return None
            raise

    def _read(self) -> snapshot_mod.LiveSnapshot:
        conn = self.host.connection()
        caps = self.capabilities()
        doms = self.host.call(
            'read', 'listAllDomains', conn.listAllDomains,
            libvirtapi.libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        self.host.listed = (conn, {d.UUIDString(): d for d in doms})
        domains: list[snapshot_mod.DomainEntry] = []
        for dom in doms:
            name = dom.name()  # local: no call to the daemon
            xml = self._live_xml(dom, name)
            if xml is None:
                continue
            memory, arrived = self._memory_and_arrival(name)
            entry: snapshot_mod.DomainEntry = {
                'xml': xml, 'active': True, 'memory_by_node_kib': memory}
            if arrived:
                entry['arrived'] = True
            if self.host.kernel_affinity:
                entry['kernel_vcpu_affinity'] = self._affinity(name)
            domains.append(entry)
        return snapshot_mod.LiveSnapshot(caps, domains)

    def vcpu_stats(self) -> VcpuStats:
        """Every running guest's cumulative vCPU counters, one call.

        Returns (monotonic time of the reading, {uuid: {'name': name,
        'vcpus': {index: {'time': ns, 'delay': ns}}}}): the sample
        ``steal.rates`` takes."""
        return self.host.with_reconnect(self._vcpu_stats)

    def vcpu_counts(self) -> dict[str, int]:
        """{uuid: online vCPUs} of every running guest (no event tells of
        a vCPU hot-plug): a listing and one call a guest, none of which
        reaches qemu."""
        return self.host.with_reconnect(self._vcpu_counts)

    def pinned_guests(self) -> dict[str, list[str]]:
        """{name: pins} of every running guest whose live XML carries a
        pin its persistent definition lacks (``migratexml.
        pins_not_defined``): the live-only pins a pass or ``release``
        wrote, which stay until the guest's qemu ends. Read-only: a
        listing and two ``XMLDesc`` calls a guest (live, inactive), each
        bounded as every call. A transient domain (no persistent
        definition: libvirt answers the inactive read with its live XML)
        shows none; nova defines every guest it runs."""
        return self.host.with_reconnect(self._pinned_guests)

    def _pinned_guests(self) -> dict[str, list[str]]:
        conn = self.host.connection()
        found = {}
        for dom in self.host.call(
                'read', 'listAllDomains', conn.listAllDomains,
                libvirtapi.libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            name = dom.name()  # local: no call to the daemon
            live = self._live_xml(dom, name)
            defined = None if live is None else self._live_xml(
                dom, name, libvirtapi.libvirt.VIR_DOMAIN_XML_INACTIVE)
            if live is None or defined is None:
                continue  # went away meanwhile
            pins = migratexml.pins_not_defined(live, defined)
            if pins:
                found[name] = pins
        return found

    def _vcpu_counts(self) -> dict[str, int]:
        conn = self.host.connection()
        # vcpusFlags(live) reads libvirt's live definition: no job, no
        # monitor. getAllDomainStats' vCPU group, one call, asks every
        # guest's qemu monitor in turn instead (4 idle guests here: 41.6
        # ms a poll against 1.1 ms; benchmarks/poll_cost.py), every
        # second of every host.
        counts = {}
        for dom in self.host.call(
                'read', 'listAllDomains', conn.listAllDomains,
                libvirtapi.libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            try:
                counts[dom.UUIDString()] = int(self.host.call(
                    'read', 'vcpusFlags', dom.vcpusFlags,
                    libvirtapi.libvirt.VIR_DOMAIN_AFFECT_LIVE))
            except libvirtapi.libvirt.libvirtError as exc:
                if libvirtapi.code(exc) not in libvirtapi.GONE:
                    raise
                # ended since the listing: nothing to bind
        return counts

    def _vcpu_stats(self) -> VcpuStats:
        conn = self.host.connection()
        records = self.host.call(
            'read', 'getAllDomainStats', conn.getAllDomainStats,
            libvirtapi.libvirt.VIR_DOMAIN_STATS_VCPU |
            libvirtapi.libvirt.VIR_DOMAIN_STATS_STATE,
            libvirtapi.libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE)
        taken = libvirtapi.now()
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

    def _proven(self, name: str,
                reader: typing.Callable[[int], _T]) -> typing.Optional[_T]:
        """``reader(pid)`` of the guest's qemu, or None: no pid, or no
        proof that the pid is its qemu here (``qemuproof``)."""
        pid = libvirtapi.qemu_pid(name, self.host.run_dir)
        if not pid:
            return None
        return self.host.proof.read(name, pid, reader)

    def _schedstat(self, name: str) -> dict[int, dict[str, int]]:
        found = self._proven(name, qemuproc.vcpu_schedstat) or {}
        return {v: {'time': t, 'delay': d} for v, (t, d) in
                sorted(found.items())}

    def _memory_from_proc(self, name: str) -> dict[str, int]:
        return self._proven(name, lambda pid: memplace.memory_by_node(
            pid, fallback=read_memory_by_node)) or {}

    def _memory_and_arrival(self, name: str) -> tuple[dict[str, int], bool]:
        """(memory per node, arrived?) of a guest; whether it arrived
        is read only when its memory lies on more than one node."""
        memory = self._memory_reader(name)
        return memory, len(memory) > 1 and self._arrived_from_proc(name)

    def _arrived_from_proc(self, name: str) -> bool:
        return bool(self._proven(name, qemuproc.arrived))

    def _affinity(self, name: str) -> dict[str, str]:
        found = self._proven(name, qemuproc.vcpu_affinity) or {}
        return {str(v): cpuset.format(cpus) for v, cpus in
                sorted(found.items())}

