"""Which guests the policy manages, and the home node of each.

Invariants:

* a guest is managed unless ``untouched_reason`` names why not: not
  running, nova-placed (instance NUMA topology), foreign with
  ``foreign_domains = ignore``, or without an online vCPU;
* a home comes from what is known of the guest first
  (``home_from_facts``): where its memory is, else its numatune, else
  its current pins; only then is one chosen (``choose_node``: the least
  loaded node with room, one-to-one room first, then ratio);
* the home node of a guest is always a node with pool CPUs: memory on a
  node without any (CXL, or all reserved) does not make a home;
* a home read from pins alone is a previous pass's choice, kept only
  while its node has room (``place``); ``order_dependent`` names the
  homes that depend on the other guests, which ``replan`` cannot keep;
* an arrived guest (``Guest.arrived``: migrated in or restored) whose
  memory qemu's incoming copy spread over several nodes is never
  cross-node for that alone while it fits one node (its vCPUs within a
  node's pool x ratio, its memory within the node's): its home is the
  node holding most of its memory when that node has room, else the
  node its vCPUs are pinned to (a previous pass's choice) when that
  has room, else chosen as for a new guest; only a guest no node has
  room for stays cross-node. Such a home is ``ARRIVED`` and is planned
  as a guest born there (one-to-one while the node has room); once its
  memory is home it reads as a ``MEMORY`` home;
* deterministic: ties go to the lowest node, guests are placed in uuid
  order (largest first when chosen).
"""

import operator
import typing

from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import topology
from nova_pinning_hooks.engine.policy import options as options_mod

# (rule, reason) of a guest left untouched (``untouched_reason``).
Reason = tuple[plan_mod.Rule, str]
# (home node or None, source, cross-node?): ``home_from_facts``.
Fact = tuple[typing.Optional[int], plan_mod.HomeSource, bool]
# (home node or None, source): ``place``.
Home = tuple[typing.Optional[int], plan_mod.HomeSource]


def untouched_reason(guest: guest_mod.Guest, options: options_mod.Options
                     ) -> typing.Optional[Reason]:
    """(rule, reason) when the policy leaves ``guest`` untouched; None
    for a managed guest."""
    rule = plan_mod.Rule
    if not guest.active:
        return rule.NOT_RUNNING, 'not running: holds no pCPU'
    if guest.nova_placed:
        return (rule.NOVA_PLACED, 'nova placed it (instance NUMA '
                'topology); its one-to-one pCPUs leave the pool')
    if not guest.nova and \
            options.foreign_domains == options_mod.ForeignDomains.IGNORE:
        return rule.FOREIGN, 'not created by nova (foreign_domains = ignore)'
    if not guest.vcpus:
        return rule.NO_VCPUS, 'no online vCPU'
    return None


_AMOUNT = operator.itemgetter(1)


def home_from_facts(guest: guest_mod.Guest, host: topology.HostTopology,
                    pool_by_node: dict[int, frozenset[int]],
                    options: options_mod.Options) -> Fact:
    """(home node or None, source, cross-node?) from what is known."""
    mem = guest.memory_by_node_kib
    total = sum(mem.values())
    if total:
        if len(mem) == 1:  # the usual guest: all on one node
            (node, amount), = mem.items()
        else:  # the most memory; the lowest node on a tie
            node, amount = max(sorted(mem.items()), key=_AMOUNT)
        if amount >= options.home_node_min_fraction * total and \
                pool_by_node.get(node):
            return node, plan_mod.HomeSource.MEMORY, False
        if guest.arrived and _fits_one_node(guest, host, pool_by_node,
                                            options):
            # Where the incoming copy put most of it: the node preferred
            # (``place`` keeps it only while it has room); None when
            # that node has no pool CPUs (then chosen).
            return (node if pool_by_node.get(node) else None,
                    plan_mod.HomeSource.ARRIVED, False)
        return None, plan_mod.HomeSource.MEMORY, True
    nodeset = guest.numa_nodeset
    if nodeset and guest.numa_mode in ('strict', 'restrictive'):
        if len(nodeset) == 1 and pool_by_node.get(min(nodeset)):
            return min(nodeset), plan_mod.HomeSource.NUMATUNE, False
        return None, plan_mod.HomeSource.NUMATUNE, True
    home = pinned_node(guest, host, pool_by_node)
    if home is not None:
        return home, plan_mod.HomeSource.PINS, False
    return None, plan_mod.HomeSource.NONE, False


def pinned_node(guest: guest_mod.Guest, host: topology.HostTopology,
                pool_by_node: dict[int, frozenset[int]]
                ) -> typing.Optional[int]:
    """The node every vCPU of ``guest`` is pinned within (its pool
    there), or None: unpinned, pinned over several nodes, or to the
    whole pool (host-range pins say nothing about a home node, even on
    a host whose pool lies in one node)."""
    pins = [guest.vcpu_pin(v) for v in guest.vcpus]
    pool = frozenset().union(*pool_by_node.values())
    if pins and all(p is not None for p in pins) and \
            not all(p == pool for p in pins):
        pinned = typing.cast('list[frozenset[int]]', pins)  # no None
        nodes = {host.node_of.get(c) for p in pinned for c in p}
        if len(nodes) == 1:
            home = nodes.pop()
            if home is not None and \
                    all(p <= pool_by_node.get(home, frozenset())
                        for p in pinned):
                return home
    return None


def _fits_one_node(guest: guest_mod.Guest, host: topology.HostTopology,
                   pool_by_node: dict[int, frozenset[int]],
                   options: options_mod.Options) -> bool:
    """Some node could hold ``guest`` alone: its vCPUs within the
    node's pool x ratio, its memory within the node's (a node of
    unknown memory holds any)."""
    ratio = float(options.allocation_ratio)
    for node, cpus in pool_by_node.items():
        node_mem = host.nodes[node].memory_kib
        if cpus and guest.vcpu_count <= len(cpus) * ratio + \
                options_mod.EPSILON and \
                (not node_mem or guest.memory_kib <= node_mem):
            return True
    return False


def _has_room(node: int, guest: guest_mod.Guest,
              pool_by_node: dict[int, frozenset[int]],
              load: typing.Mapping[int, int],
              mem_used: typing.Mapping[int, int],
              host: topology.HostTopology, rules: options_mod.Rules
              ) -> bool:
    """``node`` has room for ``guest`` beside what is homed there: its
    vCPUs within pool x ratio, its memory within the node's."""
    node_mem = host.nodes[node].memory_kib
    if node_mem and mem_used[node] + guest.memory_kib > node_mem:
        return False
    return load[node] + guest.vcpu_count <= \
        len(pool_by_node[node]) * rules.ratio + options_mod.EPSILON


def _choose_home(guest: guest_mod.Guest,
                 pool_by_node: dict[int, frozenset[int]],
                 load: dict[int, int], mem_used: dict[int, int],
                 host: topology.HostTopology, rules: options_mod.Rules
                 ) -> typing.Optional[int]:
    """Least loaded node with room: one-to-one room first, then ratio."""
    return choose_node(guest.vcpu_count, guest.memory_kib,
                       ((node, len(pool), host.nodes[node].memory_kib)
                        for node, pool in pool_by_node.items()),
                       load, mem_used, rules)


def choose_node(vcpus: int, memory_kib: int,
                nodes: typing.Iterable[tuple[int, int, int]],
                load: typing.Mapping[int, int],
                mem_used: typing.Mapping[int, int], rules: options_mod.Rules
                ) -> typing.Optional[int]:
    """The home chosen for a guest of ``vcpus`` and ``memory_kib``
    without memory facts: the least loaded node with room, one-to-one room
    first, then ratio. ``nodes``: (node, pool pCPUs, memory KiB) each;
    ``load``/``mem_used``: the vCPUs and KiB already homed there. Counts
    only: the host's next pass (``place``) and the scheduler's forecast
    (``summary``) decide by the same rule."""
    best, ratio = None, rules.ratio
    for node, size, node_mem in nodes:
        if not size:
            continue
        if node_mem and mem_used[node] + memory_kib > node_mem:
            continue
        after = load[node] + vcpus
        if after > size * ratio + options_mod.EPSILON:
            continue
        key = (after > size, after / size, node)
        if best is None or key < best[0]:
            best = (key, node)
    return None if best is None else best[1]


def order_dependent(fact: Fact) -> bool:
    """A home from these facts (``home_from_facts``) depends on the
    other guests: read from pins alone, an arrival's (kept only while
    its node has room), or yet to be chosen."""
    node, source, cross = fact
    return source in (plan_mod.HomeSource.PINS,
                      plan_mod.HomeSource.ARRIVED) or \
        (node is None and not cross)


def place(host: topology.HostTopology,
          managed: typing.Iterable[guest_mod.Guest],
          pool_by_node: dict[int, frozenset[int]],
          options: options_mod.Options, rules: options_mod.Rules,
          facts: typing.Mapping[str, Fact],
          nova_vcpus: typing.Optional[typing.Mapping[int, int]] = None
          ) -> dict[str, Home]:
    """uuid -> (home node or None, source) for every managed guest;
    ``facts``: uuid -> ``home_from_facts`` of each; ``nova_vcpus``:
    node -> vCPUs nova placed there over the pool (``layout.nova_load``).
    """
    homes: dict[str, Home] = {}
    unplaced, by_pins, arrived = [], [], []
    load = {n: (nova_vcpus or {}).get(n, 0) for n in pool_by_node}
    mem_used = dict.fromkeys(pool_by_node, 0)
    for g in managed:
        node, source, cross = facts[g.uuid]
        if source == plan_mod.HomeSource.PINS:
            # A home read from pins is a node (``home_from_facts``).
            by_pins.append((g, typing.cast(int, node)))
        elif source == plan_mod.HomeSource.ARRIVED:
            arrived.append((g, node))
        elif node is not None or cross:
            homes[g.uuid] = (node, source)
            if node is not None:
                load[node] += g.vcpu_count
                mem_used[node] += g.memory_kib
        else:
            unplaced.append(g)
    # A home read from pins alone is a previous pass's choice, not a fact
    # about the guest: it is kept only while the node has room for it.
    # Otherwise the pins would tip the node over, the host would go to
    # host range, the pins would then say nothing, and the next pass would
    # choose again: an oscillation between modes.
    for g, node in sorted(by_pins, key=lambda gn: gn[0].uuid):
        if load[node] + g.vcpu_count <= \
                len(pool_by_node[node]) * rules.ratio + options_mod.EPSILON:
            homes[g.uuid] = (node, plan_mod.HomeSource.PINS)
            load[node] += g.vcpu_count
            mem_used[node] += g.memory_kib
        else:
            unplaced.append(g)
    # Arrivals after the guests already placed (they keep their homes),
    # before the new ones: the node holding most of the memory, else the
    # node of the previous pass's pins, while it has room; else chosen
    # as for a new guest (among the nodes that have room), else
    # cross-node as their memory says.
    arrived_source = plan_mod.HomeSource.ARRIVED
    for g, most in sorted(arrived, key=lambda gn: gn[0].uuid):
        pinned = pinned_node(g, host, pool_by_node)
        node = next((n for n in (most, pinned) if n is not None and
                     _has_room(n, g, pool_by_node, load, mem_used, host,
                               rules)), None)
        if node is None:
            node = _choose_home(g, pool_by_node, load, mem_used, host,
                                rules)
        if node is None:
            homes[g.uuid] = (None, plan_mod.HomeSource.MEMORY)
            continue
        homes[g.uuid] = (node, arrived_source)
        load[node] += g.vcpu_count
        mem_used[node] += g.memory_kib
    for g in sorted(unplaced, key=lambda g: (-g.vcpu_count, g.uuid)):
        node = _choose_home(g, pool_by_node, load, mem_used, host, rules)
        if node is None:
            homes[g.uuid] = (None, plan_mod.HomeSource.NONE)
            continue
        homes[g.uuid] = (node, plan_mod.HomeSource.CHOSEN)
        load[node] += g.vcpu_count
        mem_used[node] += g.memory_kib
    return homes
