"""Host snapshots: the one input format of planning, offline or live.

A snapshot is the JSON document ``nova-pinning plan --snapshot`` reads and
``nova-pinning snapshot`` writes (see README.rst). ``load`` validates all
of it before anything is planned: any defect raises ``SnapshotError`` with
one message naming the defect, so a bad file never yields a partial plan.

Types are strict: the JSON is read by ``strict.loads_json`` (finite
numbers that fit 64 bits, no ``NaN``, no key twice, at most
``MAX_BYTES``, nested at most ``strict.MAX_JSON_DEPTH`` deep);
``version`` is the integer 1, not ``true``; ``active`` is ``true`` or
``false``, not ``"false"``; what guests and the host may cost is bounded
by ``guest`` and ``topology``.

A live pass hands ``load`` and ``Loader.load`` a ``LiveSnapshot``
instead (``virt.Host.read_snapshot``, then the pass's
``hostsettings.HostSettings``): typed, so only what libvirt gave
(capabilities, domain XML, CPU sets) is checked here; its ratio was
checked where it was read and is checked once more by the policy.
``LiveSnapshot.to_json`` is the JSON ``nova-pinning snapshot`` writes.
"""

import dataclasses
import operator
import typing
import xml.etree.ElementTree as ET  # noqa: S405 - for its type only

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import hostsettings
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine import strict
from nova_pinning_hooks.engine import topology

VERSION = 1
MAX_BYTES = 256 << 20  # of snapshot JSON
# Domain XML is parsed several documents at a time: one parser for
# several saves its set-up cost. Measured (1,000 domains, one by one
# against in groups): 0.4 KB domains 9.5 -> 4.2 ms in groups of 16;
# nova's 3.4 KB domains 65 -> 57 ms in groups of 4 (13.5 KB), but slower
# than one by one from about 20 KB a group (71 ms for 6, 77 ms for 16).
PARSE_CHUNK = 16  # documents a group, at most
PARSE_BYTES = 14 << 10  # characters a group, at most


class SnapshotError(ValueError):
    """A snapshot that cannot be planned."""


# {vCPU: CPUs}: where the kernel runs a guest's vCPU threads.
_Affinity = dict[int, frozenset[int]]


class DomainEntry(typing.TypedDict, total=False):
    """One domain of a snapshot, as read live (and as its JSON holds)."""

    # the live domain XML (None: a model's entry gone stale, refused)
    xml: typing.Optional[str]
    active: bool
    memory_by_node_kib: dict[str, int]  # {"node": KiB}
    # {"vCPU": "CPU set"}: where the kernel runs each vCPU thread
    kernel_vcpu_affinity: dict[str, str]
    # its qemu was started with -incoming (migrated in, restored); read
    # only for guests whose memory lies on more than one node
    arrived: bool


@dataclasses.dataclass(frozen=True)
class LiveSnapshot:
    """The live host as a pass read it: libvirt's capabilities and active
    domains (``virt.Host.read_snapshot``), then the ratio and CPU sets
    (``with_settings``). The list of domains is the reader's: a
    ``model.HostModel`` hands out the same entry object for a domain
    that did not change, which ``Loader`` relies on."""

    capabilities: str
    domains: list[DomainEntry]
    settings: typing.Optional[hostsettings.HostSettings] = None

    def with_settings(self, settings: hostsettings.HostSettings
                      ) -> 'LiveSnapshot':
        return dataclasses.replace(self, settings=settings)

    def to_json(self) -> dict[str, object]:
        """The snapshot JSON's object (``nova-pinning snapshot``)."""
        data: dict[str, object] = {'version': VERSION,
                                   'capabilities': self.capabilities,
                                   'domains': self.domains}
        if self.settings is not None:
            data.update(self.settings.snapshot_fields())
        return data


@dataclasses.dataclass(frozen=True)
class Snapshot:
    host: topology.HostTopology
    guests: tuple[guest_mod.Guest, ...]
    options: policy.Options
    # {uuid: {vCPU: frozenset}}: where the kernel runs each vCPU thread,
    # where the live reader saw it (``kernel_vcpu_affinity``).
    kernel_affinity: dict[str, _Affinity] = dataclasses.field(
        default_factory=dict)

    def drift(self) -> dict[str, dict[int, tuple[frozenset[int],
                                                 frozenset[int]]]]:
        """{uuid: {vCPU: (libvirt pin, kernel set)}} where they differ
        (an unpinned vCPU cannot drift)."""
        by_uuid = {g.uuid: g for g in self.guests}
        found: dict[str, dict[int, tuple[frozenset[int],
                                         frozenset[int]]]] = {}
        for uuid, kernel in self.kernel_affinity.items():
            g = by_uuid[uuid]
            for vcpu, cpus in kernel.items():
                pin = g.vcpu_pin(vcpu)
                if pin is not None and pin != cpus:
                    found.setdefault(uuid, {})[vcpu] = (pin, cpus)
        return found


def loads(text: typing.Union[str, bytes], **overrides: typing.Any
          ) -> Snapshot:
    """Parse snapshot JSON (text, or UTF-8 bytes); see ``load``."""
    try:
        data = strict.loads_json(text, 'snapshot', MAX_BYTES)
    except strict.InputError as exc:
        raise SnapshotError(str(exc)) from None
    return load(data, **overrides)


def load(data: object, from_libvirt: bool = False,
         **overrides: typing.Any) -> Snapshot:
    """Validate a snapshot (its JSON's dict, or a ``LiveSnapshot``) and
    build host, guests and policy options.

    ``overrides`` are extra ``policy.Options`` fields from configuration
    (``foreign_domains``, ``home_node_min_fraction``, ``set_home_node``,
    ``emulator_threads``).
    ``from_libvirt``: the domain XML comes straight from libvirt (a live
    pass), so it may be read only as far as the engine needs.
    """
    host, options, domains = _header(data, overrides)
    read = _domains(domains, range(len(domains)), from_libvirt, host)
    seen: set[str]
    guests, seen, kernel = [], set(), {}
    for g, affinity in read:
        _once(g, seen)
        guests.append(g)
        if affinity is not None:
            kernel[g.uuid] = affinity
    return Snapshot(host, tuple(guests), options, kernel)


class Loader:
    """Loads the snapshots of one live host pass after pass, parsing only
    the domains that changed.

    A ``model.HostModel`` hands out the same entry object for a domain
    for as long as nothing read of it changes; an entry seen before (the
    same object) keeps the ``Guest`` parsed from it. ``load`` also says
    which guests are new or differ (``changed``) and which went away
    since the previous successful load: what ``replan.Planner`` plans
    again. A snapshot it refuses changes nothing. Its cost beyond the
    changed domains is a few C-level passes over the list (no Python
    code runs per unchanged domain).
    """

    def __init__(self) -> None:
        # (capabilities text, HostTopology)
        self._host: tuple[typing.Optional[str],
                          typing.Optional[topology.HostTopology]] = (
            None, None)
        # id(entry) -> (entry, Guest, kernel affinity)
        self._seen: dict[int, tuple[object, guest_mod.Guest,
                                    typing.Optional[_Affinity]]] = {}
        self._ids: dict[str, int] = {}  # uuid -> id(entry)
        self._kernel: dict[str, _Affinity] = {}  # uuid -> kernel affinity

    def load(self, data: LiveSnapshot, **overrides: typing.Any
             ) -> tuple[Snapshot, dict[str, guest_mod.Guest], set[str]]:
        """(Snapshot, changed {uuid: Guest}, removed uuids) of ``data``,
        a live snapshot (``virt.Host.read_snapshot``); validated as
        ``load`` does, domain by domain as they first appear."""
        host, options, domains = _header(data, overrides, self._host)
        if host is not self._host[1]:  # another host: nothing carries over
            self._host = (data.capabilities, host)
            self._seen, self._ids, self._kernel = {}, {}, {}
        seen, ids = self._seen, self._ids
        # An id in ``seen`` is that of an entry ``seen`` keeps alive: no
        # other object can have it.
        order = list(map(id, domains))
        current = set(order)
        if len(current) != len(order):
            raise SnapshotError('a domain entry appears twice')
        new = current.difference(seen)
        if len(new) < 8:  # the usual pass: a scan per new entry, in C
            misses = sorted(map(order.index, new))
        else:
            misses = [i for i, key in enumerate(order) if key in new]
        stale = seen.keys() - current
        read = _domains(domains, misses, True, host)
        gone = {seen[i][1].uuid for i in stale}
        changed = {}
        for g, _ in read:
            if g.uuid in changed or ids.get(g.uuid) in current:
                raise SnapshotError('domain %s: uuid %s appears twice'
                                    % (g.name, g.uuid))
            changed[g.uuid] = g
        # Nothing raises from here on: a refused snapshot leaves the
        # loader as it was.
        for i, (g, affinity) in zip(misses, read):
            seen[order[i]] = (domains[i], g, affinity)
            ids[g.uuid] = order[i]
            self._kernel.pop(g.uuid, None)
            if affinity is not None:
                self._kernel[g.uuid] = affinity
        for i in stale:
            del seen[i]
        removed = gone.difference(changed)
        for uuid in removed:
            del ids[uuid]
            self._kernel.pop(uuid, None)
        guests = tuple(map(_GUEST, map(seen.__getitem__, order)))
        return (Snapshot(host, guests, options, dict(self._kernel)),
                changed, removed)


_GUEST = operator.itemgetter(1)


def _once(guest: guest_mod.Guest, seen: set[str]) -> None:
    if guest.uuid in seen:
        raise SnapshotError('domain %s: uuid %s appears twice'
                            % (guest.name, guest.uuid))
    seen.add(guest.uuid)


def _header(data: object, overrides: typing.Mapping[str, typing.Any],
            known: tuple[typing.Optional[str],
                         typing.Optional[topology.HostTopology]] = (
                None, None)
            ) -> tuple[topology.HostTopology, policy.Options,
                       typing.Sequence[typing.Any]]:
    """(host, options, domains) of a snapshot (its JSON's dict, or a
    ``LiveSnapshot``), all but the domains validated. ``known``:
    (capabilities text, HostTopology) parsed before, reused when the
    text is the same."""
    live = isinstance(data, LiveSnapshot)
    fields: typing.Mapping[str, object]
    if isinstance(data, LiveSnapshot):
        if data.settings is None:
            raise SnapshotError('a live snapshot without its allocation '
                                'ratio (no settings read)')
        # Parsed JSON, whatever it holds, below: from_capabilities
        # refuses what is not text.
        caps: typing.Any = data.capabilities
        fields = data.settings.snapshot_fields()
    else:
        if not isinstance(data, dict):
            raise SnapshotError('snapshot must be a JSON object')
        version = data.get('version')
        if type(version) is not int or version != VERSION:  # not 1.0
            raise SnapshotError('unknown snapshot version %.32r (this tool '
                                'reads version %d)' % (version, VERSION))
        caps = data.get('capabilities')
        fields = data
    host = known[1]
    if host is None or not isinstance(caps, str) or caps != known[0]:
        try:
            host = topology.HostTopology.from_capabilities(caps)
        except topology.TopologyError as exc:
            raise SnapshotError('capabilities: %s' % exc) from None
    ratio: typing.Any = fields.get('allocation_ratio')
    # A live snapshot's ratio passed its edge (the overcommit file's or
    # the option's check) and the policy checks it below; the snapshot
    # JSON is an edge of its own, checked here with the key's name.
    if not live and not policy.ratio_ok(ratio):
        raise SnapshotError('allocation_ratio must be a number > 0 and at '
                            'most %g (the allocation ratio), not %.32r'
                            % (policy.MAX_RATIO, ratio))
    # Options' CPU set fields by name (frozenset or None), passed as **.
    sets: dict[str, typing.Any] = {}
    for key in ('reserved_cpus', 'shared_cpus', 'dedicated_cpus'):
        value = fields.get(key)
        if value is not None and not isinstance(value, str):
            raise SnapshotError('%s must be a CPU set string or null' % key)
        try:
            sets[key] = cpuset.parse_optional(value, key, known=host.cpus)
        except cpuset.CpusetError as exc:
            raise SnapshotError(str(exc)) from None
    options = policy.Options(allocation_ratio=ratio, **sets, **overrides)
    try:
        policy.validate(host, options)
    except policy.PolicyError as exc:
        raise SnapshotError(str(exc)) from None
    domains: object = (data.domains if isinstance(data, LiveSnapshot)
                       else fields.get('domains', []))
    if not isinstance(domains, list):
        raise SnapshotError('domains must be a list')
    return host, options, domains


def _domains(domains: typing.Sequence[typing.Any],
             indices: typing.Sequence[int],
             from_libvirt: bool, host: topology.HostTopology
             ) -> list[tuple[guest_mod.Guest, typing.Optional[_Affinity]]]:
    """[(Guest, kernel affinity or None)] of ``domains[i]`` for each of
    ``indices``; SnapshotError names the first bad one."""
    for i in indices:
        dom = domains[i]
        if not isinstance(dom, dict) or not isinstance(dom.get('xml'), str):
            raise SnapshotError('domains[%d] must be an object with an '
                                '"xml" string' % i)
    max_cpu, max_node = max(host.cpus), max(host.nodes)
    indices = list(indices)
    result = []
    start = 0
    while start < len(indices):
        # The next group; built into guests before the next is parsed,
        # so that only one group's elements are alive at a time.
        end, size = start, 0
        while end < len(indices) and end - start < PARSE_CHUNK and \
                (end == start or size + len(domains[indices[end]]['xml'])
                 <= PARSE_BYTES):
            size += len(domains[indices[end]]['xml'])
            end += 1
        group = indices[start:end]
        elements: typing.Optional[
            typing.Sequence[typing.Optional[ET.Element]]] = None
        if len(group) > 1:  # one alone is parsed by Guest.from_xml
            elements = guest_mod.parse_many(
                [domains[i]['xml'] for i in group], from_libvirt)
        for i, element in zip(group, elements or [None] * len(group)):
            dom = domains[i]
            g = _guest(i, dom, from_libvirt, element, max_cpu, max_node)
            affinity = None
            if dom.get('kernel_vcpu_affinity'):
                affinity = _kernel_affinity(i, dom, g)
            result.append((g, affinity))
        start = end
    return result


def _kernel_affinity(i: int, dom: typing.Mapping[str, typing.Any],
                     guest: guest_mod.Guest) -> _Affinity:
    """``kernel_vcpu_affinity`` of a domain: {"vCPU": "CPU set"}."""
    raw = dom['kernel_vcpu_affinity']
    if not isinstance(raw, dict):
        raise SnapshotError('domains[%d]: kernel_vcpu_affinity must be an '
                            'object' % i)
    result = {}
    for key, value in raw.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit()
                and len(key) < 8) or not isinstance(value, str):
            raise SnapshotError('domains[%d]: kernel_vcpu_affinity: bad '
                                'entry %r' % (i, key))
        if int(key) not in guest.vcpus:
            continue  # a thread the XML does not count (being unplugged)
        try:
            result[int(key)] = cpuset.parse(value)
        except cpuset.CpusetError as exc:
            raise SnapshotError('domains[%d]: kernel_vcpu_affinity: %s'
                                % (i, exc)) from None
    return result


def _guest(i: int, dom: typing.Mapping[str, typing.Any],
           from_libvirt: bool, element: typing.Optional[ET.Element] = None,
           max_cpu: typing.Optional[int] = None,
           max_node: typing.Optional[int] = None) -> guest_mod.Guest:
    memory = dom.get('memory_by_node_kib') or {}
    if not isinstance(memory, dict):
        raise SnapshotError('domains[%d]: memory_by_node_kib must be an '
                            'object' % i)
    active = dom.get('active', True)
    if not isinstance(active, bool):  # "false" would read as active
        raise SnapshotError('domains[%d]: active must be true or false, '
                            'not %.32r' % (i, active))
    arrived = dom.get('arrived', False)
    if not isinstance(arrived, bool):
        raise SnapshotError('domains[%d]: arrived must be true or false, '
                            'not %.32r' % (i, arrived))
    try:
        if element is not None:
            return guest_mod.Guest.from_element(element, active, memory,
                                                max_cpu, max_node, arrived)
        return guest_mod.Guest.from_xml(dom['xml'], active=active,
                                        memory_by_node_kib=memory,
                                        from_libvirt=from_libvirt,
                                        max_cpu=max_cpu, max_node=max_node,
                                        arrived=arrived)
    except (guest_mod.GuestError, TypeError, ValueError) as exc:
        raise SnapshotError('domains[%d]: %s' % (i, exc)) from None


def make(capabilities: str,
         domains: typing.Iterable[dict[str, typing.Any]],
         allocation_ratio: float,
         reserved_cpus: typing.Optional[str] = None,
         shared_cpus: typing.Optional[str] = None,
         dedicated_cpus: typing.Optional[str] = None
         ) -> dict[str, typing.Any]:
    """Build the snapshot dict (the JSON form) from its parts (the
    benchmarks and the tests build their snapshots with it)."""
    return {'version': VERSION, 'capabilities': capabilities,
            'allocation_ratio': allocation_ratio,
            'reserved_cpus': reserved_cpus, 'shared_cpus': shared_cpus,
            'dedicated_cpus': dedicated_cpus, 'domains': list(domains)}
