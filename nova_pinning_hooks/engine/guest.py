"""Guests, read from libvirt domain XML (the live XML).

Pure: the input is the XML text plus facts from outside it (whether the
domain runs, where its memory lies); the output is a frozen ``Guest``.

Invariants:

* ``vcpus`` are the online vCPU ids only: a hot-unplugged vCPU has no
  thread and cannot be pinned live.
* A pin of ``None`` means "not pinned" (the vCPU may run on every host CPU);
  an explicit ``<vcpupin>`` wins over ``<vcpu cpuset=...>``.
* ``nova_placed`` depends only on the guest having an instance NUMA
  topology (``<cpu><numa>`` cells), never on ``<cputune>``: our own
  one-to-one pins must not make a guest look nova-placed.
* ``arrived`` is a fact from outside the XML (its qemu was started with
  ``-incoming``: a live migration's destination or a restore, whose
  memory qemu wrote rather than the guest's own vCPUs); False when
  unknown, and only ever read for guests whose memory lies on more than
  one node (``host.virtread``).
"""

import functools
import typing
import xml.etree.ElementTree as ET  # noqa: S405 - trusted or validated input

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import topology

NOVA_NS_PREFIX = '{http://openstack.org/xmlns/libvirt/nova/'

# The most vCPUs libvirt lets a QEMU/KVM domain have (QEMU's own limit
# for x86 q35 with KVM, 4096); a larger <vcpu> is a corrupt or hostile
# document, and would cost memory and time in proportion.
MAX_VCPUS = 4096
# I/O threads: libvirt has no hard limit; nothing real comes near this.
MAX_IOTHREADS = 1024

# libvirt prints every element read here before <devices>, which is often
# half of a nova guest's XML: for XML straight from libvirt, parsing stops
# there unless one of these appears after it. Snapshots, which may be
# hand-written, are always parsed whole so that any defect is reported.
_DEVICES = '<devices>'
_READ_TAGS = ('<name', '<uuid', '<metadata', '<memory', '<vcpu', '<cputune',
              '<iothread', '<numatune', '<cpu')


def _head(xml_text: str) -> str:
    """The domain XML up to ``<devices>``, closed again, or the text."""
    cut = xml_text.find(_DEVICES)
    if cut < 0:
        return xml_text
    tail = xml_text[cut:]
    if any(tag in tail for tag in _READ_TAGS):
        return xml_text
    return xml_text[:cut] + '</domain>'


class GuestError(ValueError):
    """Domain XML that cannot be understood."""


class Guest(typing.NamedTuple):
    """One domain. A NamedTuple: hosts with thousands of guests build one
    per guest per pass, and a frozen dataclass is five times slower."""

    uuid: str
    name: str
    active: bool
    vcpus: tuple[int, ...]  # online vCPU ids, ascending
    # vCPU id -> its CPUs (explicit <vcpupin>)
    vcpu_pins: dict[int, frozenset[int]]
    # from <vcpu cpuset=...>, or None
    default_cpuset: typing.Optional[frozenset[int]]
    emulator_pin: typing.Optional[frozenset[int]]
    # iothread id -> its CPUs, or None (unpinned)
    iothread_pins: dict[int, typing.Optional[frozenset[int]]]
    numa_mode: typing.Optional[str]  # <numatune><memory mode=...>
    numa_nodeset: typing.Optional[frozenset[int]]  # node ids
    memory_kib: int
    nova: bool  # created by nova (nova metadata present)
    nova_placed: bool  # nova placed it itself (instance NUMA topology)
    memory_by_node_kib: dict[int, int]  # node id -> KiB; {} when unknown
    # its qemu was started with -incoming (migrated in, or restored): its
    # memory lies where qemu's incoming copy put it, not where it ran
    arrived: bool = False

    def vcpu_pin(self, vcpu: int) -> typing.Optional[frozenset[int]]:
        """The pin in force for one vCPU (None: unpinned)."""
        return self.vcpu_pins.get(vcpu, self.default_cpuset)

    @property
    def vcpu_count(self) -> int:
        return len(self.vcpus)

    def exclusive_cpus(self,
                       dedicated_cpus: typing.Optional[frozenset[int]] = None
                       ) -> frozenset[int]:
        """CPUs nova gave this (nova-placed) guest alone.

        nova pins each dedicated vCPU (``hw:cpu_policy=dedicated``, or
        the dedicated part of ``mixed``) to one pCPU of ``[compute]
        cpu_dedicated_set``, its PCPU inventory. A shared-policy guest
        that has an instance NUMA topology all the same (a NUMA flavor,
        or a member's image with ``hw_numa_nodes``) gets pins over its
        cell's shared CPUs: one CPU each where ``cpu_shared_set`` has one
        CPU on that node, the same shape as a dedicated pin. So with
        ``dedicated_cpus`` (nova's set) known, only one-CPU pins inside it
        count. Without it nova has no PCPU inventory, except on a legacy
        ``vcpu_pin_set`` host, where its dedicated and shared CPUs are
        the same set: every one-CPU pin counts, as it always did.
        """
        return frozenset(min(p) for p in self._nova_pins(dedicated_cpus)[0])

    def shared_pins(self,
                    dedicated_cpus: typing.Optional[frozenset[int]] = None
                    ) -> tuple[typing.Optional[frozenset[int]], ...]:
        """The pins of the vCPUs nova did not dedicate (see
        ``exclusive_cpus``): the pCPUs each of them floats over, shared
        with every other thread there; None for an unpinned vCPU (every
        CPU)."""
        return self._nova_pins(dedicated_cpus)[1]

    def _nova_pins(self, dedicated_cpus: typing.Optional[frozenset[int]]
                   ) -> tuple[list[frozenset[int]],
                              tuple[typing.Optional[frozenset[int]], ...]]:
        alone, shared = [], []
        for v in self.vcpus:
            pin = self.vcpu_pins.get(v)  # nova's pins are explicit
            if pin is not None and len(pin) == 1 and (
                    dedicated_cpus is None or pin <= dedicated_cpus):
                alone.append(pin)
            else:
                shared.append(self.vcpu_pin(v))
        return alone, tuple(shared)

    @classmethod
    def from_xml(cls, xml_text: object, active: bool = True,
                 memory_by_node_kib: typing.Optional[
                     typing.Mapping[typing.Any, object]] = None,
                 from_libvirt: bool = False,
                 max_cpu: typing.Optional[int] = None,
                 max_node: typing.Optional[int] = None,
                 arrived: bool = False) -> 'Guest':
        if not isinstance(xml_text, str):
            raise GuestError('domain XML must be text')
        try:
            root = ET.fromstring(  # noqa: S314
                _head(xml_text) if from_libvirt else xml_text)
        except ET.ParseError:
            try:  # malformed head: the full text names the real defect
                root = ET.fromstring(xml_text)  # noqa: S314
            except ET.ParseError as exc:
                raise GuestError('domain XML is malformed: %s'
                                 % exc) from None
        return cls.from_element(root, active, memory_by_node_kib, max_cpu,
                                max_node, arrived)

    @classmethod
    def from_element(cls, root: ET.Element, active: bool = True,
                     memory_by_node_kib: typing.Optional[
                         typing.Mapping[typing.Any, object]] = None,
                     max_cpu: typing.Optional[int] = None,
                     max_node: typing.Optional[int] = None,
                     arrived: bool = False) -> 'Guest':
        """From a parsed ``<domain>`` element (see ``parse_many``).

        ``max_cpu``: the host's highest CPU id. Pins are read only up to
        it (a pin naming only CPUs the host lacks reads as unpinned, so a
        pass re-pins it), which bounds what a hostile pin costs.
        ``max_node``: the host's highest NUMA node id, the same for the
        memory node set."""
        if root.tag != 'domain':
            raise GuestError('expected <domain>, got <%s>' % root.tag)
        # One pass over the top-level children: ElementPath lookups cost
        # more than the parse itself for the few elements needed here.
        top: dict[str, ET.Element] = {}
        for child in root:
            top.setdefault(child.tag, child)
        name = (getattr(top.get('name'), 'text', None) or '').strip()
        uuid = (getattr(top.get('uuid'), 'text', None) or '').strip()
        if not name or not uuid:
            raise GuestError('domain XML without <name> or <uuid>')
        try:
            return cls(uuid, name, bool(active),
                       *_parse_body(top, max_cpu, max_node),
                       _memory_map(memory_by_node_kib), bool(arrived))
        except (cpuset.CpusetError, ValueError) as exc:
            raise GuestError('domain %s: %s' % (name, exc)) from None


def parse_many(texts: typing.Sequence[str], from_libvirt: bool = False
               ) -> typing.Optional[list[ET.Element]]:
    """Parse many domain XML texts at once, or return None.

    One parser for all of them costs half as much as one parser each.
    Only plain documents qualify (no declaration or DOCTYPE, exactly one
    element, nothing but blanks around it); on any doubt or parse error
    the caller parses each text alone, which names the defect precisely.
    """
    if from_libvirt:
        texts = [_head(t) for t in texts]
    for t in texts:
        if not isinstance(t, str) or '<?' in t[:64] or '<!DOCTYPE' in t:
            return None
    try:
        root = ET.fromstring(  # noqa: S314
            '<domains>' + ''.join(texts) + '</domains>')
    except ET.ParseError:
        return None
    elements = list(root)
    if len(elements) != len(texts) or (root.text or '').strip() or \
            any((e.tail or '').strip() for e in elements):
        return None
    return elements


def _pin(text: typing.Optional[str], max_cpu: typing.Optional[int]
         ) -> typing.Optional[frozenset[int]]:
    """A pin's CPU set, read up to ``max_cpu``; None if none is left."""
    return cpuset.parse(text, limit=max_cpu) or None


# What ``_parse_body`` returns: the types of ``Guest``'s fields ``vcpus``
# .. ``nova_placed``.
_Body = tuple[tuple[int, ...], dict[int, frozenset[int]],
              typing.Optional[frozenset[int]],
              typing.Optional[frozenset[int]],
              dict[int, typing.Optional[frozenset[int]]],
              typing.Optional[str], typing.Optional[frozenset[int]], int,
              bool, bool]


def _parse_body(top: typing.Mapping[str, ET.Element],
                max_cpu: typing.Optional[int] = None,
                max_node: typing.Optional[int] = None) -> _Body:
    """Guest fields ``vcpus`` .. ``nova_placed``, in field order."""
    vcpu = top.get('vcpu')
    if vcpu is None:
        raise ValueError('no <vcpu> count')
    maximum = _uint(vcpu.text, '<vcpu>', MAX_VCPUS)
    current_text = vcpu.get('current')
    current = maximum if current_text is None else \
        _uint(current_text, '<vcpu current>', maximum)
    listed = top.get('vcpus')
    if listed is not None and len(listed):
        online = tuple(sorted(_uint(v.get('id'), '<vcpu id>', maximum - 1)
                              for v in listed
                              if v.get('enabled', 'yes') == 'yes'))
    else:
        online = tuple(range(current))
    default = vcpu.get('cpuset')
    vcpu_pins, emulator, io_pins = {}, None, {}
    for pin in top.get('cputune', ()):
        if pin.tag == 'vcpupin':
            cpus = _pin(pin.get('cpuset'), max_cpu)
            vcpu_id = _uint(pin.get('vcpu'), '<vcpupin vcpu>',
                            max(maximum - 1, 0))
            if cpus is not None:
                vcpu_pins[vcpu_id] = cpus
        elif pin.tag == 'emulatorpin':
            emulator = _pin(pin.get('cpuset'), max_cpu)
        elif pin.tag == 'iothreadpin':
            io_pins[_uint(pin.get('iothread'), '<iothreadpin iothread>',
                          MAX_IOTHREADS)] = _pin(pin.get('cpuset'), max_cpu)
    for thread in _iothread_ids(top):
        io_pins.setdefault(thread, None)
    numa_mode = numa_nodeset = None
    numatune = top.get('numatune')
    mem = numatune.find('memory') if numatune is not None else None
    if mem is not None:
        numa_mode = mem.get('mode', 'strict')
        if mem.get('nodeset'):
            # Read only up to the host's highest node (without a host,
            # Linux's): nodes it lacks read as no node set.
            numa_nodeset = cpuset.parse(
                mem.get('nodeset'), limit=topology.MAX_NODE_ID
                if max_node is None else max_node) or None
    memory = top.get('memory')
    memory_kib = 0
    if memory is not None:
        memory_kib = topology.memory_to_kib(
            _uint(memory.text, '<memory>', topology.MAX_MEMORY),
            memory.get('unit'))
    metadata = top.get('metadata')
    nova = metadata is not None and any(
        child.tag.startswith(NOVA_NS_PREFIX) for child in metadata)
    cpu = top.get('cpu')
    numa = cpu.find('numa') if cpu is not None else None
    return (online, vcpu_pins,
            _pin(default, max_cpu) if default else None,
            emulator, io_pins, numa_mode, numa_nodeset, memory_kib, nova,
            numa is not None and numa.find('cell') is not None)


@functools.lru_cache(maxsize=4096)
def _uint(text: typing.Optional[str], what: str, maximum: int) -> int:
    """A count or id of the domain XML: ASCII digits, at most
    ``maximum``; ValueError otherwise. Cached: a host's guests repeat
    the same few counts."""
    return cpuset.parse_uint(text if text is not None else '', what,
                             maximum)


def _iothread_ids(top: typing.Mapping[str, ET.Element]) -> list[int]:
    ids = [_uint(t.get('id'), '<iothread id>', MAX_IOTHREADS)
           for t in top.get('iothreadids', ()) if t.tag == 'iothread']
    if len(ids) > MAX_IOTHREADS:
        raise ValueError('more than %d I/O threads' % MAX_IOTHREADS)
    if ids:
        return ids
    count = top.get('iothreads')
    if count is None:
        return []
    return list(range(1, _uint(count.text, '<iothreads>', MAX_IOTHREADS)
                      + 1))


def _memory_map(raw: typing.Optional[typing.Mapping[typing.Any, object]]
                ) -> dict[int, int]:
    if not raw:
        return {}
    result = {}
    for node, kib in raw.items():
        if isinstance(node, int) and not isinstance(node, bool):
            node = str(node)
        if not isinstance(node, str):
            raise ValueError('memory_by_node_kib node must be a number, '
                             'not %r' % (node,))
        node_id = _uint(node, 'memory_by_node_kib node',
                        topology.MAX_NODE_ID)
        if isinstance(kib, bool) or not isinstance(kib, int) or \
                not 0 <= kib <= topology.MAX_MEMORY:
            raise GuestError('memory_by_node_kib: %.32r is not a KiB '
                             'count' % (kib,))
        if kib:
            result[node_id] = kib
    return result
