"""The binding policy: the seed's rules as one pure function.

``make_plan(host, guests, options)`` decides, for every guest, a mode, a
home node and the pCPUs of each of its threads. Rules (SPEC.md):

1. total managed vCPUs > |P| x r: every managed guest -> host range (P);
2. per node n, single-node guests totalling V_n:
   V_n > |P_n| x r on any node -> every managed guest -> host range;
   |P_n| < V_n <= |P_n| x r -> the node's guests -> node range (P_n);
   V_n <= |P_n| -> the node's guests -> one-to-one in P_n;
3. cross-node guests totalling V_X, F = P minus one-to-one pCPUs:
   V_X > |F| x r -> every managed guest -> host range; else -> range on F.

Invariants of the plan:

* only live guests are bound; nova-placed guests (instance NUMA topology)
  and, if so configured, foreign domains are ``untouched``, and the pCPUs
  nova pinned one-to-one leave the pool;
* every pin lies in the pool P; one-to-one pCPUs serve one vCPU each and
  never span nodes; emulator and I/O threads follow the guest's vCPUs;
* deterministic, and stable: see ``assign`` for what one-to-one guests
  keep; a guest's home node comes from where its memory is, else its
  numatune, else its current pins, and only then is one chosen;
* the home node of a guest is always a node with pool CPUs: memory on a
  node without any (CXL, or all reserved) does not make a home.
"""

import dataclasses
import math

from nova_pinning_hooks import assign
from nova_pinning_hooks import plan as plan_mod

EPSILON = 1e-9


class PolicyError(ValueError):
    """Inputs the policy refuses (bad ratio, CPU sets outside the host)."""


@dataclasses.dataclass(frozen=True)
class Options:
    allocation_ratio: float
    reserved_cpus: object = None  # frozenset or None
    shared_cpus: object = None  # nova's cpu_shared_set
    dedicated_cpus: object = None  # nova's cpu_dedicated_set
    foreign_domains: str = 'manage'  # or 'ignore'
    home_node_min_fraction: float = 0.9
    set_home_node: bool = False  # emit numa nodesets for chosen homes


# nova sets no upper bound; ours keeps every product with a CPU count a
# finite float (an int ratio of 400 digits overflows one).
MAX_RATIO = 1e6


def ratio_ok(ratio):
    """A number > 0 and at most ``MAX_RATIO`` (not a bool, not NaN)."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
        return False
    try:
        value = float(ratio)
    except OverflowError:
        return False
    return math.isfinite(value) and 0 < value <= MAX_RATIO


def validate(host, options):
    ratio = options.allocation_ratio
    if not ratio_ok(ratio):
        raise PolicyError('allocation ratio must be a number > 0 and at '
                          'most %g, not %.32r' % (MAX_RATIO, ratio))
    for what in ('reserved_cpus', 'shared_cpus', 'dedicated_cpus'):
        cpus = getattr(options, what)
        if cpus is not None and not cpus <= host.cpus:
            raise PolicyError('%s names CPUs the host does not have online: '
                              '%s' % (what, sorted(cpus - host.cpus)))
    if options.foreign_domains not in ('manage', 'ignore'):
        raise PolicyError('foreign_domains must be manage or ignore')


def guest_pool(host, guests, options):
    """The guest pool P (see SPEC.md, Terms)."""
    pool = set(host.cpus)
    for cpus in (options.reserved_cpus, options.dedicated_cpus):
        pool -= cpus or set()
    for g in guests:
        if g.active and g.nova_placed:
            pool -= g.exclusive_cpus()
    if options.shared_cpus is not None:
        pool &= options.shared_cpus
    return frozenset(pool)


def _untouched_reason(guest, options):
    if not guest.active:
        return 'not-running', 'not running: holds no pCPU'
    if guest.nova_placed:
        return ('nova-placed', 'nova placed it (instance NUMA topology); '
                'its one-to-one pCPUs leave the pool')
    if not guest.nova and options.foreign_domains == 'ignore':
        return 'foreign', 'not created by nova (foreign_domains = ignore)'
    if not guest.vcpus:
        return 'no-vcpus', 'no online vCPU'
    return None


def _home_from_facts(guest, host, pool_by_node, options):
    """(home node or None, source, cross-node?) from what is known."""
    mem = guest.memory_by_node_kib
    total = sum(mem.values())
    if total:
        node, amount = max(sorted(mem.items()), key=lambda kv: kv[1])
        if amount >= options.home_node_min_fraction * total and \
                pool_by_node.get(node):
            return node, 'memory', False
        return None, 'memory', True
    nodeset = guest.numa_nodeset
    if nodeset and guest.numa_mode in ('strict', 'restrictive'):
        if len(nodeset) == 1 and pool_by_node.get(min(nodeset)):
            return min(nodeset), 'numatune', False
        return None, 'numatune', True
    pins = [guest.vcpu_pin(v) for v in guest.vcpus]
    pool = frozenset().union(*pool_by_node.values())
    # Host-range pins (the whole pool) say nothing about a home node, even
    # on a host whose pool lies in one node.
    if pins and all(p is not None for p in pins) and \
            not all(p == pool for p in pins):
        nodes = {host.node_of.get(c) for p in pins for c in p}
        if len(nodes) == 1:
            node = nodes.pop()
            if node is not None and \
                    all(p <= pool_by_node.get(node, ()) for p in pins):
                return node, 'pins', False
    return None, 'none', False


def _choose_home(guest, pool_by_node, load, mem_used, host, ratio):
    """Least loaded node with room: one-to-one room first, then ratio."""
    best = None
    for node, pool in pool_by_node.items():
        if not pool:
            continue
        node_mem = host.nodes[node].memory_kib
        if node_mem and mem_used[node] + guest.memory_kib > node_mem:
            continue
        after = load[node] + guest.vcpu_count
        if after > len(pool) * ratio + EPSILON:
            continue
        key = (after > len(pool), after / len(pool), node)
        if best is None or key < best[0]:
            best = (key, node)
    return None if best is None else best[1]


def make_plan(host, guests, options):
    """The plan for ``guests`` (``Guest`` objects) on ``host``."""
    validate(host, options)
    ratio = float(options.allocation_ratio)
    pool = guest_pool(host, guests, options)
    pool_by_node = {n: node.cpus & pool for n, node in host.nodes.items()}
    decided = {}
    managed = []
    for g in guests:
        why = _untouched_reason(g, options)
        if why:
            decided[g.uuid] = _untouched(g, *why)
        else:
            managed.append(g)
    homes = _place(host, managed, pool_by_node, options, ratio)
    modes = _modes(host, managed, homes, pool, pool_by_node, ratio)
    for g in managed:
        gp = modes[g.uuid]
        if options.set_home_node and gp.home_node is not None and \
                gp.home_source in ('chosen', 'pins'):
            # Memory not placed yet: give it the home node too, so that
            # the home survives a later host range (pins then say nothing).
            gp = gp._replace(numa_nodeset=frozenset((gp.home_node,)))
        decided[g.uuid] = gp
    node_vcpus = dict.fromkeys(host.nodes, 0)
    cross = 0
    for g in managed:
        home = homes[g.uuid][0]
        if home is None:
            cross += g.vcpu_count
        else:
            node_vcpus[home] += g.vcpu_count
    return plan_mod.Plan(
        guests=tuple(decided[g.uuid] for g in guests), pool=pool,
        pool_by_node=pool_by_node, allocation_ratio=ratio,
        total_vcpus=sum(g.vcpu_count for g in managed),
        node_vcpus=node_vcpus, cross_node_vcpus=cross)


def _place(host, managed, pool_by_node, options, ratio):
    """uuid -> (home node or None, source) for every managed guest."""
    homes, unplaced, by_pins = {}, [], []
    load = dict.fromkeys(pool_by_node, 0)
    mem_used = dict.fromkeys(pool_by_node, 0)
    for g in managed:
        node, source, cross = _home_from_facts(g, host, pool_by_node,
                                               options)
        if source == 'pins':
            by_pins.append((g, node))
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
                len(pool_by_node[node]) * ratio + EPSILON:
            homes[g.uuid] = (node, 'pins')
            load[node] += g.vcpu_count
            mem_used[node] += g.memory_kib
        else:
            unplaced.append(g)
    for g in sorted(unplaced, key=lambda g: (-g.vcpu_count, g.uuid)):
        node = _choose_home(g, pool_by_node, load, mem_used, host, ratio)
        if node is None:
            homes[g.uuid] = (None, 'none')
            continue
        homes[g.uuid] = (node, 'chosen')
        load[node] += g.vcpu_count
        mem_used[node] += g.memory_kib
    return homes


def _modes(host, managed, homes, pool, pool_by_node, ratio):
    """uuid -> GuestPlan for managed guests, by the seed's rules."""
    if not managed:
        return {}
    if not pool:
        return {g.uuid: _untouched(g, 'empty-pool', 'the guest pool is '
                                   'empty: every CPU is reserved or '
                                   'dedicated') for g in managed}
    total = sum(g.vcpu_count for g in managed)
    if total > len(pool) * ratio + EPSILON:
        return _all_host_range(managed, homes, pool, 'rule-1', (
            'host oversubscribed: %d vCPUs > %d pCPUs x %g'
            % (total, len(pool), ratio)))
    by_node = {n: [] for n in pool_by_node}
    cross = []
    for g in managed:
        home = homes[g.uuid][0]
        (cross if home is None else by_node[home]).append(g)
    for node, members in by_node.items():
        v_n = sum(g.vcpu_count for g in members)
        if v_n > len(pool_by_node[node]) * ratio + EPSILON:
            return _all_host_range(managed, homes, pool, 'rule-2', (
                'node %d oversubscribed: %d vCPUs > %d pCPUs x %g'
                % (node, v_n, len(pool_by_node[node]), ratio)))
    result = {}
    dedicated_cpus = set()
    for node, members in by_node.items():
        node_pool = pool_by_node[node]
        v_n = sum(g.vcpu_count for g in members)
        if v_n <= len(node_pool):
            pins = assign.assign_node(host, node_pool, members)
            for g in members:
                vcpu_pins = {v: frozenset((c,))
                             for v, c in sorted(pins[g.uuid].items())}
                dedicated_cpus.update(pins[g.uuid].values())
                result[g.uuid] = _bound(
                    g, homes, plan_mod.DEDICATED, vcpu_pins,
                    frozenset(pins[g.uuid].values()), 'rule-2-one-to-one',
                    'node %d has room: %d vCPUs <= %d pCPUs'
                    % (node, v_n, len(node_pool)))
        else:
            reason = ('node %d shared: %d pCPUs < %d vCPUs <= %d x %g'
                      % (node, len(node_pool), v_n, len(node_pool), ratio))
            for g in members:
                result[g.uuid] = _ranged(g, homes, plan_mod.NODE_RANGE,
                                         node_pool, 'rule-2-node-range',
                                         reason)
    free = pool - dedicated_cpus
    v_x = sum(g.vcpu_count for g in cross)
    if v_x > len(free) * ratio + EPSILON:
        return _all_host_range(managed, homes, pool, 'rule-3', (
            'cross-node guests oversubscribed: %d vCPUs > %d pCPUs '
            'without one-to-one binding x %g' % (v_x, len(free), ratio)))
    for g in cross:
        result[g.uuid] = _ranged(
            g, homes, plan_mod.CROSS_NODE_RANGE, free, 'rule-3',
            'memory on several nodes: %d cross-node vCPUs on %d pCPUs '
            'without one-to-one binding' % (v_x, len(free)))
    return result


def _all_host_range(managed, homes, pool, rule, reason):
    return {g.uuid: _ranged(g, homes, plan_mod.HOST_RANGE, pool,
                            rule + '-host-range', reason)
            for g in managed}


def _ranged(guest, homes, mode, cpus, rule, reason):
    return _bound(guest, homes, mode, dict.fromkeys(guest.vcpus, cpus), cpus,
                  rule, reason)


def _bound(guest, homes, mode, vcpu_pins, emulator, rule, reason):
    home, source = homes[guest.uuid]
    return plan_mod.GuestPlan(
        uuid=guest.uuid, name=guest.name, mode=mode, home_node=home,
        home_source=source, vcpu_pins=vcpu_pins, emulator_pin=emulator,
        iothread_pins=dict.fromkeys(guest.iothread_pins, emulator),
        rule=rule, reason=reason)


def _untouched(guest, rule, reason):
    return plan_mod.GuestPlan(
        uuid=guest.uuid, name=guest.name, mode=plan_mod.UNTOUCHED,
        home_node=None, home_source='none', vcpu_pins={},
        emulator_pin=None, iothread_pins={}, rule=rule, reason=reason)


def release_plan(host, guests, options):
    """Undo binding: every guest the policy would manage goes back on all
    online CPUs (vCPUs, emulator and I/O threads); the rest stay untouched.
    Used to switch the package off without restarting guests."""
    validate(host, options)
    everything = host.cpus
    decided = []
    for g in guests:
        why = _untouched_reason(g, options)
        if why and why[0] != 'empty-pool':
            decided.append(_untouched(g, *why))
            continue
        decided.append(plan_mod.GuestPlan(
            uuid=g.uuid, name=g.name, mode=plan_mod.RELEASED,
            home_node=None, home_source='none',
            vcpu_pins=dict.fromkeys(g.vcpus, everything),
            emulator_pin=everything,
            iothread_pins=dict.fromkeys(g.iothread_pins, everything),
            rule='release', reason='released: every online CPU'))
    return plan_mod.Plan(
        guests=tuple(decided), pool=everything,
        pool_by_node={n: node.cpus for n, node in host.nodes.items()},
        allocation_ratio=float(options.allocation_ratio),
        total_vcpus=sum(len(gp.vcpu_pins) for gp in decided),
        node_vcpus={}, cross_node_vcpus=0)
