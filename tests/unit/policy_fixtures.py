"""Building blocks for policy tests: guests on named hosts, planned."""

from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine import topology
from tests.unit import hosts

GIB = 1024 * 1024


def G(name, vcpus, mem=None, active=True, **xml):
    """A guest; ``mem`` is a node id, a list of node ids (memory split
    evenly) or None (memory not placed yet)."""
    if mem is None:
        memory = {}
    elif isinstance(mem, int):
        memory = {str(mem): GIB}
    else:
        memory = {str(n): GIB // len(mem) for n in mem}
    xml.setdefault('uuid', 'uuid-' + name)
    return guest_mod.Guest.from_xml(hosts.domain_xml(name, vcpus, **xml),
                                    active=active, memory_by_node_kib=memory)


def host(name):
    return topology.HostTopology.from_capabilities(hosts.load(name))


def make(host_name, guests, ratio=4.0, **options):
    h = host(host_name)
    p = policy.make_plan(h, guests,
                         policy.Options(allocation_ratio=ratio, **options))
    return h, p


def by_name(p):
    return {gp.name: gp for gp in p.guests}


def applied(guests, p, only=None):
    """The guests as they look after ``p`` was applied (live XML).
    ``only``: the uuids written to; the others stay the same objects."""
    plans = {gp.uuid: gp for gp in p.guests}
    result = []
    for g in guests:
        gp = plans[g.uuid]
        if gp.mode == plan_mod.UNTOUCHED or \
                (only is not None and g.uuid not in only):
            result.append(g)
            continue
        pins = dict(g.vcpu_pins)
        pins.update(gp.vcpu_pins)
        io = dict(g.iothread_pins)
        io.update(gp.iothread_pins)
        changes = dict(vcpu_pins=pins, emulator_pin=gp.emulator_pin,
                       iothread_pins=io)
        if gp.numa_nodeset is not None:
            changes.update(numa_mode='restrictive',
                           numa_nodeset=gp.numa_nodeset)
        result.append(g._replace(**changes))
    return result
