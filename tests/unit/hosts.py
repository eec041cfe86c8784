"""Named host topologies for tests, as libvirt capabilities XML.

The four hosts of ``FILES`` in tests/data/hosts come from the project's
shared fixtures, the four of ``BANKED`` (the same layout, with libvirt's
``<cache>`` banks) were written for issue 21; the rest are built here for
the shapes real hosts have: offline CPUs, nodes of different sizes, a node
with memory and no CPUs, siblings numbered next to each other, SMT4.
"""

import os
import zlib

from nova_pinning_hooks.engine import cpuset

DATA = os.path.join(os.path.dirname(__file__), '..', 'data', 'hosts')
FILES = ('small-1node', 'intel-2s-28c-ht', 'amd-2s-64c-nps4', 'arm-1s-80c')
# Hosts with real-shaped L3 cache banks (issue 21), in the same layout:
# Genoa NPS1 (24 L3 of 8 cores), Bergamo NPS1 (32 CCX L3 of 8 cores),
# Milan NPS4 (two 8-core CCDs per node) and Sapphire Rapids SNC2 (one L3
# per socket, spanning its two sub-NUMA nodes, as the CPU reports it).
BANKED = ('bergamo-2s-nps1', 'genoa-2s-nps1', 'intel-2s-snc2',
          'milan-2s-nps4')


def capabilities(nodes, offline=(), memory_kib=16 * 1024 * 1024,
                 banks=None):
    """Capabilities XML for ``nodes``: a list (per node) of cores, each a
    list of CPU ids (its hyperthreads). CPUs in ``offline`` are listed the
    way libvirt lists offline CPUs: a bare ``<cpu id='N'/>``. ``banks``:
    the CPU sets of the L3 caches (``<host><cache><bank level='3'>``),
    as libvirt 9 prints them (text, or a list of CPU ids each)."""
    cells = []
    for node_id, cores in enumerate(nodes):
        cpus = []
        for core_id, core in enumerate(cores):
            siblings = ','.join(str(c) for c in core)
            for cpu in core:
                if cpu in offline:
                    cpus.append("<cpu id='%d'/>" % cpu)
                else:
                    cpus.append("<cpu id='%d' socket_id='%d' die_id='0' "
                                "core_id='%d' siblings='%s'/>"
                                % (cpu, node_id, core_id, siblings))
        cells.append("<cell id='%d'><memory unit='KiB'>%d</memory>"
                     "<cpus num='%d'>%s</cpus></cell>"
                     % (node_id, memory_kib, len(cpus), ''.join(cpus)))
    cache = ''
    if banks is not None:
        cache = '<cache>%s</cache>' % ''.join(
            "<bank id='%d' level='3' type='both' size='32' unit='MiB' "
            "cpus='%s'/>" % (i, b if isinstance(b, str) else
                             cpuset.format(frozenset(b)))
            for i, b in enumerate(banks))
    return ("<capabilities><host><cpu><arch>x86_64</arch></cpu><topology>"
            "<cells num='%d'>%s</cells></topology>%s</host></capabilities>"
            % (len(nodes), ''.join(cells), cache))


def strip_banks(xml):
    """The capabilities ``xml`` without its ``<cache>`` banks: the host as
    it was planned before banks were read."""
    start = xml.find('<cache>')
    if start < 0:
        return xml
    return xml[:start] + xml[xml.index('</cache>') + len('</cache>'):]


def _ht(first_core, ncores, total_cores):
    """Linux x86 numbering: thread 1 of core c is c + total_cores."""
    return [[c, c + total_cores] for c in range(first_core,
                                                first_core + ncores)]


def _built():
    return {
        'this-machine': capabilities([[[0], [1]]]),
        'offline-cpus': capabilities(
            [_ht(0, 4, 8), _ht(4, 4, 8)], offline=(3, 11, 13)),
        'uneven-nodes': capabilities(
            [[[c] for c in range(0, 8)], [[c] for c in range(8, 12)]]),
        'memory-only-node': capabilities(
            [_ht(0, 4, 8), _ht(4, 4, 8), []]),
        'adjacent-siblings': capabilities(
            [[[2 * c, 2 * c + 1] for c in range(0, 4)],
             [[2 * c, 2 * c + 1] for c in range(4, 8)]]),
        'smt4': capabilities(
            [[[4 * c + t for t in range(4)] for c in range(0, 4)],
             [[4 * c + t for t in range(4)] for c in range(4, 8)]]),
    }


def load(name):
    """Capabilities XML text of a named host."""
    if name in FILES or name in BANKED:
        with open(os.path.join(DATA, name + '.xml')) as f:
            return f.read()
    return _built()[name]


ALL = FILES + tuple(sorted(_built()))


def domain_xml(name, vcpus, uuid=None, pins=None, emulator=None,
               nova=True, numa_cells=False, current=None, iothreads=0,
               numatune=None, memory_kib=1048576):
    """Domain XML as libvirt prints it live; ``pins`` maps vCPU -> text."""
    uuid = uuid or 'a0000000-0000-4000-8000-%012d' % zlib.crc32(
        name.encode())
    parts = ["<domain type='kvm'><name>%s</name><uuid>%s</uuid>"
             % (name, uuid)]
    if nova:
        parts.append("<metadata><nova:instance xmlns:nova='http://openstack"
                     ".org/xmlns/libvirt/nova/1.1'><nova:name>%s</nova:name>"
                     "</nova:instance></metadata>" % name)
    parts.append("<memory unit='KiB'>%d</memory>" % memory_kib)
    if current is not None:
        parts.append("<vcpu placement='static' current='%d'>%d</vcpu>"
                     % (current, vcpus))
    else:
        parts.append("<vcpu placement='static'>%d</vcpu>" % vcpus)
    if iothreads:
        parts.append('<iothreads>%d</iothreads>' % iothreads)
    if pins or emulator:
        parts.append('<cputune>')
        for vcpu, cpus in sorted((pins or {}).items()):
            parts.append("<vcpupin vcpu='%d' cpuset='%s'/>" % (vcpu, cpus))
        if emulator:
            parts.append("<emulatorpin cpuset='%s'/>" % emulator)
        parts.append('</cputune>')
    if numatune:
        parts.append("<numatune><memory mode='strict' nodeset='%s'/>"
                     "</numatune>" % numatune)
    if numa_cells:
        parts.append("<cpu><numa><cell id='0' cpus='0-%d' memory='%d' "
                     "unit='KiB'/></numa></cpu>" % (vcpus - 1, memory_kib))
    parts.append('</domain>')
    return ''.join(parts)
