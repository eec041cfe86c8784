"""Host topology, read from libvirt's capabilities XML.

Pure: the input is the XML text (``virConnect.getCapabilities()``), the
output plain data.

Invariants of a ``HostTopology``:

* Only online CPUs appear anywhere. libvirt lists an offline CPU as a bare
  ``<cpu id='N'/>`` (no socket, core or siblings): it is dropped, and it is
  dropped from every sibling set too.
* Every online CPU belongs to exactly one node and exactly one core; a core
  is the set of its online hyperthread siblings (1 to N threads, SMT4
  included), whatever the numbering (``c, c+ncores`` or ``2c, 2c+1``).
* Nodes may have memory and no CPUs, and nodes may differ in size.
* L3 domains (``l3_of``: cpu -> the online CPUs sharing its last-level
  cache) come from the level-3 ``<host><cache><bank>`` elements. They are
  optional: without banks ``l3_of`` is empty and every node is one
  domain, exactly as before banks were read. Each domain lies inside one
  node and holds whole cores: a bank that spans nodes is split at the
  node boundary (a guest of one node shares that node's part of it).
  Bank data that cannot be trusted (a CPU in two banks, a CPU that is
  not in the topology, an online CPU in no bank, a core split between
  banks) is ignored as a whole, with the reason in ``l3_ignored``: cache
  alignment is an optimisation, and bad cache data must never stop a
  host from being planned.
* Bounded whatever the XML says: numbers in ASCII digits, CPU ids at most
  ``cpuset.MAX_CPU_ID``, node ids at most ``MAX_NODE_ID``, a core at most
  ``MAX_THREADS_PER_CORE`` threads, siblings read only up to the highest
  CPU listed; parsing costs time and memory linear in the XML.
"""

import dataclasses
import typing
import xml.etree.ElementTree as ET  # noqa: S405 - trusted or validated input

from nova_pinning_hooks.engine import cpuset

# Linux numbers NUMA nodes below MAX_NUMNODES, at most 1 << 10: a larger
# cell id is not a host (and nodes x guests is what planning costs).
MAX_NODE_ID = 1023
# SMT8 (POWER, SPARC) is the most hardware threads a core has; four times
# that leaves room and bounds what one siblings list may cost.
MAX_THREADS_PER_CORE = 32


class TopologyError(ValueError):
    """Capabilities XML that does not describe a usable host."""


@dataclasses.dataclass(frozen=True)
class Node:
    """One NUMA node: its online CPUs and its memory."""

    id: int
    cpus: frozenset[int]
    memory_kib: int


@dataclasses.dataclass(frozen=True)
class HostTopology:
    """Online CPUs, NUMA nodes and hyperthread cores of one host."""

    nodes: dict[int, Node]  # node id -> Node, ascending ids
    node_of: dict[int, int]  # cpu -> node id
    # cpu -> frozenset of its online siblings (incl. itself)
    core_of: dict[int, frozenset[int]]
    # cpu -> frozenset of the online CPUs of its node sharing its L3;
    # empty: no (usable) banks, one domain per node.
    l3_of: dict[int, frozenset[int]] = dataclasses.field(
        default_factory=dict)
    l3_ignored: str = ''  # why the banks were ignored, if they were

    def l3_domains(self, cpus: typing.Iterable[int]
                   ) -> list[frozenset[int]]:
        """The L3 domains that intersect ``cpus``, ordered by lowest id;
        without banks, each node's CPUs are one domain."""
        if not self.l3_of:
            by_node: dict[int, set[int]] = {}
            for c in cpus:
                by_node.setdefault(self.node_of[c], set())
            return [self.nodes[n].cpus for n in sorted(by_node)]
        seen = {self.l3_of[c] for c in cpus}
        return sorted(seen, key=min)

    @property
    def cpus(self) -> frozenset[int]:
        """All online CPUs."""
        return frozenset(self.node_of)

    def cores(self, cpus: typing.Iterable[int]) -> list[frozenset[int]]:
        """The distinct cores that intersect ``cpus``, ordered by lowest id."""
        seen = {self.core_of[c] for c in cpus}
        return sorted(seen, key=min)

    @classmethod
    def from_capabilities(cls, xml_text: str) -> 'HostTopology':
        """Parse ``<capabilities>`` XML text; raise TopologyError if bad."""
        try:
            root = ET.fromstring(xml_text)  # noqa: S314
        except ET.ParseError as exc:
            raise TopologyError('capabilities XML is malformed: %s'
                                % exc) from None
        except TypeError:
            raise TopologyError('capabilities must be XML text') from None
        cells = root.findall('./host/topology/cells/cell')
        if not cells:
            raise TopologyError('capabilities XML has no '
                                '<host><topology><cells> NUMA cells')
        listed = [(cell, [(cpu, _int_attr(cpu, 'id', 'cpu'))
                          for cpu in cell.findall('./cpus/cpu')])
                  for cell in cells]
        # Siblings are read only up to the highest CPU listed, and a core
        # has at most MAX_THREADS_PER_CORE: a hostile siblings list costs
        # no more than an honest one.
        top = max((cpu_id for _, cpus in listed for _, cpu_id in cpus),
                  default=0)
        nodes, node_of, raw_siblings = {}, {}, {}
        for cell, cpus in listed:
            node_id = _int_attr(cell, 'id', 'cell', MAX_NODE_ID)
            if node_id in nodes:
                raise TopologyError('NUMA cell %d appears twice' % node_id)
            online = set()
            for cpu, cpu_id in cpus:
                siblings = cpu.get('siblings')
                if siblings is None:
                    continue  # offline: libvirt knows no topology for it
                if cpu_id in node_of:
                    raise TopologyError('CPU %d appears in two cells'
                                        % cpu_id)
                try:
                    raw_siblings[cpu_id] = cpuset.parse(
                        siblings, limit=top,
                        max_count=MAX_THREADS_PER_CORE)
                except cpuset.CpusetError as exc:
                    raise TopologyError('CPU %d: bad siblings: %s'
                                        % (cpu_id, exc)) from None
                node_of[cpu_id] = node_id
                online.add(cpu_id)
            nodes[node_id] = Node(node_id, frozenset(online),
                                  _memory_kib(cell))
        if not node_of:
            raise TopologyError('capabilities XML lists no online CPU')
        core_of = {}
        for cpu_id, sibling_cpus in raw_siblings.items():
            core = (sibling_cpus & node_of.keys()) | {cpu_id}
            core_of[cpu_id] = frozenset(core)
        _check_cores(core_of, node_of)
        ordered = {k: nodes[k] for k in sorted(nodes)}
        l3_of, ignored = _l3_domains(
            root, node_of, core_of, top,
            {cpu_id for _, cpus in listed for _, cpu_id in cpus})
        return cls(ordered, node_of, core_of, l3_of, ignored)


def _l3_domains(root: ET.Element, node_of: dict[int, int],
                core_of: dict[int, frozenset[int]], top: int,
                listed: typing.AbstractSet[int]
                ) -> tuple[dict[int, frozenset[int]], str]:
    """(cpu -> L3 domain, why ignored) from the level-3 cache banks."""
    banks = [b for b in root.findall('./host/cache/bank')
             if b.get('level') == '3']
    if not banks:
        return {}, ''
    owner = {}
    for bank in banks:
        try:
            cpus = cpuset.parse(bank.get('cpus') or '')
        except cpuset.CpusetError as exc:
            return {}, 'L3 bank %s: bad cpus: %s' % (bank.get('id'), exc)
        for cpu in cpus:
            if cpu in owner:
                return {}, 'CPU %d is in two L3 banks' % cpu
            owner[cpu] = cpus
    # Offline CPUs (listed in a cell, without topology) may be named.
    unknown = sorted(set(owner) - listed)
    if unknown:
        return {}, 'L3 banks name CPU %d, which the host does not have' % (
            unknown[0])
    missing = sorted(set(node_of) - set(owner))
    if missing:
        return {}, 'online CPU %d is in no L3 bank' % missing[0]
    l3_of = {}
    for cpu, node in node_of.items():
        # Online CPUs of this node that share the bank (a bank spanning
        # nodes is split at the node boundary).
        l3_of[cpu] = frozenset(c for c in owner[cpu]
                               if node_of.get(c) == node)
    for cpu, core in core_of.items():
        if any(l3_of[s] != l3_of[cpu] for s in core):
            return {}, 'the siblings of CPU %d are in different L3 banks' % (
                cpu)
    # One frozenset object per domain: cheap to compare and to group.
    canonical: dict[frozenset[int], frozenset[int]] = {}
    return {c: canonical.setdefault(d, d) for c, d in l3_of.items()}, ''


def _check_cores(core_of: dict[int, frozenset[int]],
                 node_of: dict[int, int]) -> None:
    for cpu_id, core in core_of.items():
        for sibling in core:
            if core_of[sibling] != core:
                raise TopologyError('CPUs %d and %d disagree about their '
                                    'siblings' % (cpu_id, sibling))
            if node_of[sibling] != node_of[cpu_id]:
                raise TopologyError('siblings %d and %d are in different '
                                    'NUMA cells' % (cpu_id, sibling))


def _int_attr(elem: ET.Element, name: str, what: str,
              maximum: int = cpuset.MAX_CPU_ID) -> int:
    value = elem.get(name)
    try:
        return cpuset.parse_uint(value, '<%s %s>' % (what, name), maximum)
    except ValueError:
        raise TopologyError('<%s> without a numeric %s attribute (ASCII '
                            'digits, at most %d)' % (
                                what, name, maximum)) from None


MAX_MEMORY = 10 ** 15  # in any unit: more than any host has in bytes

_UNIT_KIB = {'b': 1 / 1024, 'bytes': 1 / 1024, 'k': 1, 'kib': 1,
             'kb': 1000 / 1024, 'm': 1024, 'mib': 1024, 'g': 1024 ** 2,
             'gib': 1024 ** 2, 't': 1024 ** 3, 'tib': 1024 ** 3}


def _memory_kib(cell: ET.Element) -> int:
    mem = cell.find('memory')
    if mem is None:
        return 0
    try:
        value = cpuset.parse_uint(mem.text or '', 'cell memory', MAX_MEMORY)
    except ValueError as exc:
        raise TopologyError(str(exc)) from None
    factor = _UNIT_KIB.get(mem.get('unit', 'KiB').lower(), 1)
    return int(value * factor)


def memory_to_kib(value: int, unit: typing.Optional[str]) -> int:
    """Convert a libvirt memory value to KiB (domain XML shares units)."""
    return int(value * _UNIT_KIB.get((unit or 'KiB').lower(), 1))
