"""Named host topologies for tests, as libvirt capabilities XML.

The four hosts in tests/data/hosts come from the project's shared fixtures;
the rest are built here for the shapes real hosts have: offline CPUs, nodes
of different sizes, a node with memory and no CPUs, siblings numbered next
to each other, SMT4.
"""

import os
import zlib

from nova_pinning_hooks import cpuset

DATA = os.path.join(os.path.dirname(__file__), '..', 'data', 'hosts')
FILES = ('small-1node', 'intel-2s-28c-ht', 'amd-2s-64c-nps4', 'arm-1s-80c')


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


def _epyc(sockets, nodes_per_socket, cores_per_node, cores_per_l3):
    """An AMD EPYC host: cores numbered socket by socket, thread 1 of core
    c is c + all cores (Linux's numbering there), one L3 domain (a CCD or
    CCX) per ``cores_per_l3`` consecutive cores."""
    total = sockets * nodes_per_socket * cores_per_node
    nodes = [_ht(n * cores_per_node, cores_per_node, total)
             for n in range(sockets * nodes_per_socket)]
    banks = [list(range(first, first + cores_per_l3)) +
             [c + total for c in range(first, first + cores_per_l3)]
             for first in range(0, total, cores_per_l3)]
    return capabilities(nodes, banks=banks)


def _banked():
    """Hosts with real-shaped L3 banks (issue 21)."""
    return {
        # Genoa 9654, NPS1: 2 x 96 cores, 12 CCDs of 8 cores per socket.
        'genoa-2s-nps1': _epyc(2, 1, 96, 8),
        # Bergamo 9754, NPS1: 2 x 128 Zen 4c cores; each 16-core CCD is
        # two 8-core CCXs, each with its own L3.
        'bergamo-2s-nps1': _epyc(2, 1, 128, 8),
        # Milan 7763, NPS4: 2 x 64 cores in 4 nodes each, 8-core CCDs.
        'milan-2s-nps4': _epyc(2, 4, 16, 8),
        # Intel Sapphire Rapids 8480 with SNC2: 2 x 56 cores, 4 nodes of
        # 28, an L3 slice per sub-NUMA node.
        'intel-2s-snc2': capabilities(
            [_ht(n * 28, 28, 112) for n in range(4)],
            banks=[list(range(n * 28, n * 28 + 28)) +
                   list(range(112 + n * 28, 112 + n * 28 + 28))
                   for n in range(4)]),
    }


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
    if name in FILES:
        with open(os.path.join(DATA, name + '.xml')) as f:
            return f.read()
    built = _built()
    return built[name] if name in built else _banked()[name]


ALL = FILES + tuple(sorted(_built()))
BANKED = tuple(sorted(_banked()))


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
