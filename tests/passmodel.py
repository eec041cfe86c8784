"""A host's pass as ``benchmarks/fleet.py`` and
``tests/nova_functional/test_weigher.py`` model it (no libvirt, no
/proc): the engine's plan, the pins written, and where a new guest's
memory lands."""

from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy

# A guest floating over these is given memory on every node.
SHARED = (plan_mod.CROSS_NODE_RANGE, plan_mod.HOST_RANGE)


def replan(topo, guests, options, nodes):
    """``policy.make_plan`` for ``guests`` (uuid -> ``Guest``, updated in
    place), the pins written; a new guest's memory (no memory facts yet)
    lands where its vCPUs run: on its home node, or spread over
    ``nodes`` when it floats (host range, cross-node range), which makes
    it cross-node: planned again at once. Returns the last plan."""
    again = True
    while again:
        again = False
        p = policy.make_plan(topo, list(guests.values()), options)
        for gp in p.guests:
            g = guests[gp.uuid]
            change = {}
            if gp.vcpu_pins != g.vcpu_pins:
                change['vcpu_pins'] = gp.vcpu_pins
            if not g.memory_by_node_kib:
                if gp.mode in SHARED or gp.home_node is None:
                    change['memory_by_node_kib'] = dict.fromkeys(
                        nodes, g.memory_kib // len(nodes))
                    again = again or len(nodes) > 1
                else:
                    change['memory_by_node_kib'] = {
                        gp.home_node: g.memory_kib}
            if change:
                guests[gp.uuid] = g._replace(**change)
    return p
