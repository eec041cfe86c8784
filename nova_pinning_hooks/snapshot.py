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
"""

import dataclasses

from nova_pinning_hooks import cpuset
from nova_pinning_hooks import guest as guest_mod
from nova_pinning_hooks import policy
from nova_pinning_hooks import strict
from nova_pinning_hooks import topology

VERSION = 1
MAX_BYTES = 256 << 20  # of snapshot JSON
# Small domain XML is parsed PARSE_CHUNK documents at a time: one parser
# for several saves its set-up cost (1,000 0.4 KB domains: 65 -> 43 ms).
# For large XML (nova's 3 KB) it measured slower, so those are parsed one
# by one.
PARSE_CHUNK = 16
SMALL_XML = 1024  # mean bytes per domain


class SnapshotError(ValueError):
    """A snapshot that cannot be planned."""


@dataclasses.dataclass(frozen=True)
class Snapshot:
    host: topology.HostTopology
    guests: tuple
    options: policy.Options
    # {uuid: {vCPU: frozenset}}: where the kernel runs each vCPU thread,
    # where the live reader saw it (``kernel_vcpu_affinity``).
    kernel_affinity: dict = dataclasses.field(default_factory=dict)

    def drift(self):
        """{uuid: {vCPU: (libvirt pin, kernel set)}} where they differ
        (an unpinned vCPU cannot drift)."""
        by_uuid = {g.uuid: g for g in self.guests}
        found = {}
        for uuid, kernel in self.kernel_affinity.items():
            g = by_uuid[uuid]
            for vcpu, cpus in kernel.items():
                pin = g.vcpu_pin(vcpu)
                if pin is not None and pin != cpus:
                    found.setdefault(uuid, {})[vcpu] = (pin, cpus)
        return found


def loads(text, **overrides):
    """Parse snapshot JSON (text, or UTF-8 bytes); see ``load``."""
    try:
        data = strict.loads_json(text, 'snapshot', MAX_BYTES)
    except strict.InputError as exc:
        raise SnapshotError(str(exc)) from None
    return load(data, **overrides)


def load(data, from_libvirt=False, guest_cache=None, **overrides):
    """Validate a snapshot dict and build host, guests and policy options.

    ``overrides`` are extra ``policy.Options`` fields from configuration
    (``foreign_domains``, ``home_node_min_fraction``, ``set_home_node``).
    ``from_libvirt``: the domain XML comes straight from libvirt (a live
    pass), so it may be read only as far as the engine needs.
    ``guest_cache``: a dict a long-lived caller keeps between loads; a
    domain whose XML text, ``active`` and memory placement equal what an
    earlier load saw on the same host is not parsed again (its ``Guest``
    is frozen). It is rewritten to hold only this load's domains.
    """
    if not isinstance(data, dict):
        raise SnapshotError('snapshot must be a JSON object')
    version = data.get('version')
    if type(version) is not int or version != VERSION:  # not True, 1.0
        raise SnapshotError('unknown snapshot version %.32r (this tool '
                            'reads version %d)' % (version, VERSION))
    try:
        host = topology.HostTopology.from_capabilities(
            data.get('capabilities'))
    except topology.TopologyError as exc:
        raise SnapshotError('capabilities: %s' % exc) from None
    ratio = data.get('allocation_ratio')
    if not policy.ratio_ok(ratio):
        raise SnapshotError('allocation_ratio must be a number > 0 and at '
                            'most %g (the allocation ratio), not %.32r'
                            % (policy.MAX_RATIO, ratio))
    sets = {}
    for key in ('reserved_cpus', 'shared_cpus', 'dedicated_cpus'):
        value = data.get(key)
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
    domains = data.get('domains', [])
    if not isinstance(domains, list):
        raise SnapshotError('domains must be a list')
    for i, dom in enumerate(domains):
        if not isinstance(dom, dict) or not isinstance(dom.get('xml'), str):
            raise SnapshotError('domains[%d] must be an object with an '
                                '"xml" string' % i)
    max_cpu, max_node = max(host.cpus), max(host.nodes)
    cached = [None] * len(domains)
    if guest_cache is not None:
        if guest_cache.get(None) != (max_cpu, max_node, from_libvirt):
            guest_cache.clear()  # another host: nothing carries over
        keys = [(d['xml'], d.get('active', True),
                 repr(d.get('memory_by_node_kib'))) for d in domains]
        cached = [guest_cache.get(k) for k in keys]
    parsed = [None] * len(domains)
    todo = [i for i, c in enumerate(cached) if c is None]
    texts = [domains[i]['xml'] for i in todo]
    if texts and sum(map(len, texts)) <= SMALL_XML * len(texts):
        for start in range(0, len(texts), PARSE_CHUNK):
            chunk = texts[start:start + PARSE_CHUNK]
            for i, element in zip(todo[start:start + len(chunk)],
                                  guest_mod.parse_many(chunk, from_libvirt)
                                  or [None] * len(chunk)):
                parsed[i] = element
    guests, seen, kernel = [], set(), {}
    for i, dom in enumerate(domains):
        g = cached[i] or _guest(i, dom, from_libvirt, parsed[i], max_cpu,
                                max_node)
        if g.uuid in seen:
            raise SnapshotError('domain %s: uuid %s appears twice'
                                % (g.name, g.uuid))
        seen.add(g.uuid)
        guests.append(g)
        if dom.get('kernel_vcpu_affinity'):
            kernel[g.uuid] = _kernel_affinity(i, dom, g)
    if guest_cache is not None:
        guest_cache.clear()
        guest_cache.update(zip(keys, guests))
        guest_cache[None] = (max_cpu, max_node, from_libvirt)
    return Snapshot(host, tuple(guests), options, kernel)


def _kernel_affinity(i, dom, guest):
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


def _guest(i, dom, from_libvirt, element=None, max_cpu=None,
           max_node=None):
    memory = dom.get('memory_by_node_kib') or {}
    if not isinstance(memory, dict):
        raise SnapshotError('domains[%d]: memory_by_node_kib must be an '
                            'object' % i)
    active = dom.get('active', True)
    if not isinstance(active, bool):  # "false" would read as active
        raise SnapshotError('domains[%d]: active must be true or false, '
                            'not %.32r' % (i, active))
    try:
        if element is not None:
            return guest_mod.Guest.from_element(element, active, memory,
                                                max_cpu, max_node)
        return guest_mod.Guest.from_xml(dom['xml'], active=active,
                                        memory_by_node_kib=memory,
                                        from_libvirt=from_libvirt,
                                        max_cpu=max_cpu, max_node=max_node)
    except (guest_mod.GuestError, TypeError, ValueError) as exc:
        raise SnapshotError('domains[%d]: %s' % (i, exc)) from None


def make(capabilities, domains, allocation_ratio, reserved_cpus=None,
         shared_cpus=None, dedicated_cpus=None):
    """Build the snapshot dict (the JSON form) from its parts."""
    return {'version': VERSION, 'capabilities': capabilities,
            'allocation_ratio': allocation_ratio,
            'reserved_cpus': reserved_cpus, 'shared_cpus': shared_cpus,
            'dedicated_cpus': dedicated_cpus, 'domains': list(domains)}
