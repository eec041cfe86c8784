"""The binding policy: the seed's rules as pure functions.

``make_plan(host, guests, options)`` decides, for every guest, a mode, a
home node and the pCPUs of each of its threads. Rules
(doc/source/policy.rst):

1. total managed vCPUs > |P| x r: every managed guest -> host range (P);
2. per node n, single-node guests totalling V_n:
   V_n > |P_n| x r on any node -> every managed guest -> host range;
   |P_n| < V_n <= |P_n| x r -> the node's guests -> node range (P_n);
   V_n <= |P_n| -> the node's guests -> one-to-one in P_n;
3. cross-node guests totalling V_X, F = P minus one-to-one pCPUs:
   V_X > |F| x r -> every managed guest -> host range; else -> range on F.

Invariants of the plan:

* only live guests are bound; nova-placed guests (instance NUMA topology)
  and, if so configured, foreign domains are ``untouched``; the pCPUs
  nova dedicated (``Guest.exclusive_cpus``: in ``cpu_dedicated_set``
  when that is known) leave the pool, and nova-placed vCPUs that float
  over pool CPUs (a shared-policy guest with a NUMA topology, from a
  flavor or a member's ``hw_numa_nodes`` image) never take CPUs out:
  they count as load on the nodes they float over (``nova_load``), and
  no one-to-one pCPU is claimed on such a node;
* every pin lies in the pool P; one-to-one pCPUs serve one vCPU each and
  never span nodes; emulator and I/O threads follow the guest's vCPUs,
  or, one-to-one with ``emulator_threads = shared``, float over the home
  node's pool CPUs no one-to-one vCPU holds (``emuthreads``);
* deterministic, and stable: see ``assign`` for what one-to-one guests
  keep; a guest's home node comes from where its memory is, else its
  numatune, else its current pins, and only then is one chosen;
* the home node of a guest is always a node with pool CPUs: memory on a
  node without any (CXL, or all reserved) does not make a home;
* the rules see only totals (``decide``: a ``Layout``), and a guest's
  plan depends only on the layout, its own facts and, one-to-one, the
  other guests of its node. Reasons name the rule and the node, never a
  count (the counts are the plan's totals), so a plan made again after
  one guest changed leaves every section it did not touch as it was:
  ``replan`` relies on it.
"""

import dataclasses
import math
import operator
import typing

from nova_pinning_hooks.engine import assign
from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import topology

EPSILON = 1e-9

# (rule, reason) of a guest left untouched (``_untouched_reason``).
_Reason = tuple[str, str]
# (home node or None, source, cross-node?): ``_home_from_facts``.
_Fact = tuple[typing.Optional[int], str, bool]
# (home node or None, source): ``_place``.
_Home = tuple[typing.Optional[int], str]


class PolicyError(ValueError):
    """Inputs the policy refuses (bad ratio, CPU sets outside the host)."""


@dataclasses.dataclass(frozen=True)
class Options:
    allocation_ratio: float
    reserved_cpus: typing.Optional[frozenset[int]] = None
    # nova's cpu_shared_set
    shared_cpus: typing.Optional[frozenset[int]] = None
    # nova's cpu_dedicated_set
    dedicated_cpus: typing.Optional[frozenset[int]] = None
    foreign_domains: str = 'manage'  # or 'ignore'
    home_node_min_fraction: float = 0.9
    set_home_node: bool = False  # emit numa nodesets for chosen homes
    # ``emuthreads``; the engine's default plans as before the option,
    # the configuration's (conf.py) is SHARED.
    emulator_threads: str = emuthreads.GUEST


# nova sets no upper bound; ours keeps every product with a CPU count a
# finite float (an int ratio of 400 digits overflows one).
MAX_RATIO = 1e6


def ratio_ok(ratio: object) -> bool:
    """A number > 0 and at most ``MAX_RATIO`` (not a bool, not NaN)."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
        return False
    try:
        value = float(ratio)
    except OverflowError:
        return False
    return math.isfinite(value) and 0 < value <= MAX_RATIO


def validate(host: topology.HostTopology, options: Options) -> None:
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
    if options.emulator_threads not in emuthreads.SETTINGS:
        raise PolicyError('emulator_threads must be guest or shared')


def guest_pool(host: topology.HostTopology,
               guests: typing.Iterable[guest_mod.Guest],
               options: Options) -> frozenset[int]:
    """The guest pool P (doc/source/policy.rst, "Terms")."""
    pool = set(host.cpus)
    for cpus in (options.reserved_cpus, options.dedicated_cpus):
        pool -= cpus or set()
    for g in guests:
        if g.active and g.nova_placed:
            pool -= g.exclusive_cpus(options.dedicated_cpus)
    if options.shared_cpus is not None:
        pool &= options.shared_cpus
    return frozenset(pool)


def _untouched_reason(guest: guest_mod.Guest, options: Options
                      ) -> typing.Optional[_Reason]:
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


_AMOUNT = operator.itemgetter(1)


def _home_from_facts(guest: guest_mod.Guest, host: topology.HostTopology,
                     pool_by_node: dict[int, frozenset[int]],
                     options: Options) -> _Fact:
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
        pinned = typing.cast('list[frozenset[int]]', pins)  # no None
        nodes = {host.node_of.get(c) for p in pinned for c in p}
        if len(nodes) == 1:
            home = nodes.pop()
            if home is not None and \
                    all(p <= pool_by_node.get(home, frozenset())
                        for p in pinned):
                return home, 'pins', False
    return None, 'none', False


def _choose_home(guest: guest_mod.Guest,
                 pool_by_node: dict[int, frozenset[int]],
                 load: dict[int, int], mem_used: dict[int, int],
                 host: topology.HostTopology, ratio: float
                 ) -> typing.Optional[int]:
    """Least loaded node with room: one-to-one room first, then ratio."""
    return choose_node(guest.vcpu_count, guest.memory_kib,
                       ((node, len(pool), host.nodes[node].memory_kib)
                        for node, pool in pool_by_node.items()),
                       load, mem_used, ratio)


def choose_node(vcpus: int, memory_kib: int,
                nodes: typing.Iterable[tuple[int, int, int]],
                load: typing.Mapping[int, int],
                mem_used: typing.Mapping[int, int], ratio: float
                ) -> typing.Optional[int]:
    """The home chosen for a guest of ``vcpus`` and ``memory_kib``
    without memory facts: the least loaded node with room, one-to-one room
    first, then ratio. ``nodes``: (node, pool pCPUs, memory KiB) each;
    ``load``/``mem_used``: the vCPUs and KiB already homed there. Counts
    only: the host's next pass (``_place``) and the scheduler's forecast
    (``summary``) decide by the same rule."""
    best = None
    for node, size, node_mem in nodes:
        if not size:
            continue
        if node_mem and mem_used[node] + memory_kib > node_mem:
            continue
        after = load[node] + vcpus
        if after > size * ratio + EPSILON:
            continue
        key = (after > size, after / size, node)
        if best is None or key < best[0]:
            best = (key, node)
    return None if best is None else best[1]


def make_plan(host: topology.HostTopology,
              guests: typing.Sequence[guest_mod.Guest],
              options: Options) -> plan_mod.Plan:
    """The plan for ``guests`` (``Guest`` objects) on ``host``."""
    return plan_with_state(host, guests, options)[0]


EMPTY_POOL = ('the guest pool is empty: every CPU is reserved or '
              'dedicated')
NODE_REASONS = {
    plan_mod.DEDICATED: ('rule-2-one-to-one',
                         'node %d has room: its vCPUs fit its pool '
                         'one-to-one'),
    plan_mod.NODE_RANGE: ('rule-2-node-range',
                          'node %d shared: more vCPUs than its pool, '
                          'within pool x ratio'),
}
# A node nova-placed shared vCPUs float over: its pCPUs serve them too,
# so none of them can be one guest's alone.
NOVA_SHARED_REASON = ('rule-2-node-range',
                      'node %d shared: guests nova placed (shared policy, '
                      'a NUMA topology) float over its pool; within pool '
                      'x ratio')
CROSS_REASON = ('rule-3', 'memory on several nodes: a range on the pCPUs '
                'without one-to-one binding')


class Totals(typing.NamedTuple):
    """The vCPU counts the rules compare: all managed guests, the
    single-node ones by home node (every node of the host), the
    cross-node ones; each with the vCPUs nova placed over the pool
    without dedicating CPUs to them (``nova_load``), whose nodes are
    ``nova_nodes``."""

    total: int
    node_vcpus: dict[int, int]
    cross: int
    nova_nodes: frozenset[int] = frozenset()


class Layout(typing.NamedTuple):
    """What the rules decided for the host as a whole.

    ``kind``: ``none`` (no managed guest), ``empty-pool``, ``host`` (every
    managed guest on the pool: ``rule`` and ``reason`` say why) or
    ``nodes`` (``modes``: node -> one-to-one or node range; cross-node
    guests on the pCPUs left without one-to-one binding). A guest's plan
    depends on the layout, its home and, one-to-one, its node's other
    guests: never on counts, so that a plan made again for one changed
    guest leaves every other guest of an unchanged section as it was.
    """

    kind: str
    rule: typing.Optional[str] = None
    reason: typing.Optional[str] = None
    # ((node, mode), ...) in node order
    modes: tuple[tuple[int, str], ...] = ()
    # Totals.nova_nodes, ``nodes``
    nova_nodes: frozenset[int] = frozenset()


def decide(pool: frozenset[int], pool_by_node: dict[int, frozenset[int]],
           ratio: float, totals: Totals, managed: int) -> Layout:
    """The layout for these totals (the seed's rules 1 to 3);
    ``managed``: how many guests are managed."""
    return decide_sizes(len(pool), {n: len(p) for n, p in
                                    pool_by_node.items()},
                        ratio, totals, managed)


def decide_sizes(pool: int, node_sizes: typing.Mapping[int, int],
                 ratio: float, totals: Totals, managed: int) -> Layout:
    """``decide`` on counts alone: ``pool`` pCPUs in all, ``node_sizes``
    node -> its pool pCPUs (in node order). The rules read nothing else,
    so the scheduler's forecast (``summary``) decides as a pass does."""
    if not managed:
        return Layout('none')
    if not pool:
        return Layout('empty-pool', 'empty-pool', EMPTY_POOL)
    if totals.total > pool * ratio + EPSILON:
        return Layout('host', 'rule-1-host-range',
                      'host oversubscribed: its vCPUs exceed the guest '
                      'pool x ratio')
    for node, size in node_sizes.items():
        if totals.node_vcpus[node] > size * ratio + EPSILON:
            return Layout('host', 'rule-2-host-range',
                          'node %d oversubscribed: its vCPUs exceed its '
                          'pool x ratio' % node)
    modes, one_to_one = [], 0
    for node, size in node_sizes.items():
        v_n = totals.node_vcpus[node]
        if v_n <= size and node not in totals.nova_nodes:
            modes.append((node, plan_mod.DEDICATED))
            one_to_one += v_n  # one pCPU each
        else:
            modes.append((node, plan_mod.NODE_RANGE))
    if totals.cross > (pool - one_to_one) * ratio + EPSILON:
        return Layout('host', 'rule-3-host-range',
                      'cross-node guests oversubscribed: their vCPUs '
                      'exceed the pCPUs without one-to-one binding x ratio')
    return Layout('nodes', modes=tuple(modes),
                  nova_nodes=totals.nova_nodes)


class State(typing.NamedTuple):
    """What a plan was made from and how, beyond the plan itself: what
    ``replan`` needs to bring it up to date for a few changed guests."""

    pool: frozenset[int]
    pool_by_node: dict[int, frozenset[int]]
    guests: dict[str, guest_mod.Guest]  # uuid -> Guest
    # uuid -> (rule, reason) for untouched guests, else None
    why: dict[str, typing.Optional[_Reason]]
    # uuid -> (node, source, cross) for managed guests
    facts: dict[str, _Fact]
    homes: dict[str, _Home]  # uuid -> (home node or None, source)
    totals: Totals
    layout: Layout
    # node -> {uuid: None} single-node guests, guest order
    members: dict[int, dict[str, None]]
    cross: dict[str, None]  # {uuid: None} cross-node guests
    # node -> its one-to-one pCPUs
    one_to_one: dict[int, frozenset[int]]
    # pool minus one-to-one pCPUs (cross-node range)
    free: frozenset[int]
    plans: dict[str, plan_mod.GuestPlan]  # uuid -> GuestPlan
    dependent_homes: int  # managed guests whose home is order_dependent


def plan_with_state(host: topology.HostTopology,
                    guests: typing.Sequence[guest_mod.Guest],
                    options: Options) -> tuple[plan_mod.Plan, State]:
    """(plan, ``State``) for ``guests`` on ``host``: the whole host."""
    validate(host, options)
    ratio = float(options.allocation_ratio)
    pool = guest_pool(host, guests, options)
    pool_by_node = {n: node.cpus & pool for n, node in host.nodes.items()}
    load = nova_load(host, guests, pool, options)
    why, facts, managed = {}, {}, []
    for g in guests:
        why[g.uuid] = reason = _untouched_reason(g, options)
        if reason is None:
            managed.append(g)
            facts[g.uuid] = _home_from_facts(g, host, pool_by_node,
                                             options)
    homes = _place(host, managed, pool_by_node, options, ratio, facts,
                   load.node_vcpus)
    members: dict[int, dict[str, None]] = {n: {} for n in host.nodes}
    cross: dict[str, None] = {}
    for g in managed:
        home = homes[g.uuid][0]
        (cross if home is None else members[home])[g.uuid] = None
    by_uuid = {g.uuid: g for g in guests}
    totals = totals_of(by_uuid, members, cross, load)
    layout = decide(pool, pool_by_node, ratio, totals, len(managed))
    plans = {}
    for g in guests:
        if why[g.uuid] is not None:
            plans[g.uuid] = _untouched(
                g, *typing.cast(_Reason, why[g.uuid]))
    one_to_one, free = {}, pool
    if layout.kind == 'nodes':
        for node, mode in layout.modes:
            section = node_plans(host, node, mode, pool_by_node[node],
                                 [by_uuid[u] for u in members[node]],
                                 homes, options,
                                 node in layout.nova_nodes)
            plans.update(section)
            if mode == plan_mod.DEDICATED:
                one_to_one[node] = dedicated_cpus(section.values())
        free = pool.difference(*one_to_one.values())
        for u in cross:
            plans[u] = cross_plan(by_uuid[u], free, homes, options)
    elif layout.kind != 'none':
        for g in managed:
            plans[g.uuid] = host_plan(g, layout, pool, homes, options)
    state = State(pool, pool_by_node, by_uuid, why, facts, homes, totals,
                  layout, members, cross, one_to_one, free, plans,
                  sum(map(order_dependent, facts.values())))
    return plan_of(state, guests, ratio, options), state


def plan_of(state: State, guests: typing.Iterable[guest_mod.Guest],
            ratio: float, options: Options) -> plan_mod.Plan:
    """The ``Plan`` of a ``State``, its guests in the order of
    ``guests``."""
    return plan_mod.Plan(
        guests=tuple(map(state.plans.__getitem__, map(_UUID, guests))),
        pool=state.pool,
        pool_by_node=state.pool_by_node, allocation_ratio=ratio,
        total_vcpus=state.totals.total,
        node_vcpus=dict(state.totals.node_vcpus),
        cross_node_vcpus=state.totals.cross,
        emulator_threads=options.emulator_threads)


_UUID = operator.attrgetter('uuid')


def nova_load(host: topology.HostTopology,
              guests: typing.Iterable[guest_mod.Guest], pool: frozenset[int],
              options: Options) -> Totals:
    """``Totals`` of the vCPUs nova placed over the pool itself: the
    vCPUs of nova-placed guests it did not dedicate
    (``Guest.shared_pins``), each on the node its pin's pool CPUs lie
    in, or cross-node when they span nodes (an unpinned one: the whole
    pool). A vCPU whose pin has no pool CPU floats where guests do not:
    no load."""
    node_vcpus = dict.fromkeys(host.nodes, 0)
    cross, nodes = 0, set()
    for g in guests:
        if not (g.active and g.nova_placed):
            continue
        for pin in g.shared_pins(options.dedicated_cpus):
            cpus = pool if pin is None else pin & pool
            # Pool CPUs are online: every one has a node.
            where = typing.cast('set[int]',
                                {host.node_of.get(c) for c in cpus})
            if not where:
                continue
            nodes.update(where)
            if len(where) == 1:
                node_vcpus[min(where)] += 1
            else:
                cross += 1
    return Totals(sum(node_vcpus.values()) + cross, node_vcpus, cross,
                  frozenset(nodes))


def totals_of(by_uuid: typing.Mapping[str, guest_mod.Guest],
              members: typing.Mapping[int, typing.Iterable[str]],
              cross: typing.Iterable[str],
              load: typing.Optional[Totals] = None) -> Totals:
    """``Totals`` of the guests in ``members`` and ``cross``, on top of
    ``load`` (``nova_load``)."""
    base = load.node_vcpus if load is not None else {}
    node_vcpus = {n: base.get(n, 0) +
                  sum(by_uuid[u].vcpu_count for u in guests)
                  for n, guests in members.items()}
    cross_vcpus = sum(by_uuid[u].vcpu_count for u in cross) + \
        (load.cross if load is not None else 0)
    return Totals(sum(node_vcpus.values()) + cross_vcpus, node_vcpus,
                  cross_vcpus,
                  load.nova_nodes if load is not None else frozenset())


def node_plans(host: topology.HostTopology, node: int, mode: str,
               node_pool: frozenset[int],
               members: typing.Sequence[guest_mod.Guest],
               homes: typing.Mapping[str, _Home], options: Options,
               nova_shared: bool = False
               ) -> dict[str, plan_mod.GuestPlan]:
    """uuid -> GuestPlan for the single-node guests of ``node``;
    ``nova_shared``: nova-placed vCPUs float over its pool too."""
    rule, reason = (NOVA_SHARED_REASON if nova_shared and
                    mode == plan_mod.NODE_RANGE else NODE_REASONS[mode])
    reason %= node
    if mode == plan_mod.NODE_RANGE:
        return {g.uuid: _ranged(g, homes, mode, node_pool, rule, reason,
                                options) for g in members}
    pins, split = assign.assign_node(host, node_pool, members)
    held = frozenset().union(*(p.values() for p in pins.values()))
    setting = options.emulator_threads
    return {g.uuid: _bound(g, homes, mode,
                           {v: frozenset((c,))
                            for v, c in sorted(pins[g.uuid].items())},
                           emuthreads.place(
                               setting, True,
                               frozenset(pins[g.uuid].values()), node,
                               node_pool, held), rule,
                           reason if g.uuid not in split else
                           '%s; split across L3 domains: %s' % (
                               reason, split[g.uuid]), options)
            for g in members}


def dedicated_cpus(plans: typing.Iterable[plan_mod.GuestPlan]
                   ) -> frozenset[int]:
    """The pCPUs one-to-one ``plans``' vCPUs hold."""
    return frozenset().union(*(c for gp in plans
                               for c in gp.vcpu_pins.values()))


def cross_plan(guest: guest_mod.Guest, free: frozenset[int],
               homes: typing.Mapping[str, _Home], options: Options
               ) -> plan_mod.GuestPlan:
    return _ranged(guest, homes, plan_mod.CROSS_NODE_RANGE, free,
                   *CROSS_REASON, options)


def host_plan(guest: guest_mod.Guest, layout: Layout, pool: frozenset[int],
              homes: typing.Mapping[str, _Home], options: Options
              ) -> plan_mod.GuestPlan:
    """The plan of a managed guest under a host-wide layout."""
    # Every layout but ``none`` (which plans no guest) has both.
    rule = typing.cast(str, layout.rule)
    reason = typing.cast(str, layout.reason)
    if layout.kind == 'empty-pool':
        return _untouched(guest, rule, reason)
    return _ranged(guest, homes, plan_mod.HOST_RANGE, pool, rule, reason,
                   options)


def order_dependent(fact: _Fact) -> bool:
    """A home from these facts (``_home_from_facts``) depends on the
    other guests: read from pins alone, or yet to be chosen."""
    node, source, cross = fact
    return source == 'pins' or (node is None and not cross)


def _place(host: topology.HostTopology,
           managed: typing.Iterable[guest_mod.Guest],
           pool_by_node: dict[int, frozenset[int]], options: Options,
           ratio: float, facts: typing.Mapping[str, _Fact],
           nova_vcpus: typing.Optional[typing.Mapping[int, int]] = None
           ) -> dict[str, _Home]:
    """uuid -> (home node or None, source) for every managed guest;
    ``facts``: uuid -> ``_home_from_facts`` of each; ``nova_vcpus``:
    node -> vCPUs nova placed there over the pool (``nova_load``)."""
    homes, unplaced, by_pins = {}, [], []
    load = {n: (nova_vcpus or {}).get(n, 0) for n in pool_by_node}
    mem_used = dict.fromkeys(pool_by_node, 0)
    for g in managed:
        node, source, cross = facts[g.uuid]
        if source == 'pins':
            # A home read from pins is a node (``_home_from_facts``).
            by_pins.append((g, typing.cast(int, node)))
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


def _ranged(guest: guest_mod.Guest, homes: typing.Mapping[str, _Home],
            mode: str, cpus: frozenset[int], rule: str, reason: str,
            options: Options) -> plan_mod.GuestPlan:
    # Range guests keep their emulator and I/O threads on their range
    # with either setting (``emuthreads``).
    return _bound(guest, homes, mode, dict.fromkeys(guest.vcpus, cpus),
                  (cpus,) + emuthreads.with_vcpus(options.emulator_threads),
                  rule, reason, options)


def _bound(guest: guest_mod.Guest, homes: typing.Mapping[str, _Home],
           mode: str, vcpu_pins: dict[int, frozenset[int]],
           emulator: tuple[frozenset[int], str, str], rule: str,
           reason: str, options: Options) -> plan_mod.GuestPlan:
    """``emulator``: where the guest's emulator and I/O threads run and
    why, an ``emuthreads.Placement`` or the same as a plain tuple."""
    home, source = homes[guest.uuid]
    nodeset = None
    if options.set_home_node and home is not None and \
            source in ('chosen', 'pins'):
        # Memory not placed yet: give it the home node too, so that
        # the home survives a later host range (pins then say nothing).
        nodeset = frozenset((home,))
    # Positional: a plan of a thousand guests builds a thousand of these.
    cpus, emulator_rule, emulator_reason = emulator
    return plan_mod.GuestPlan(
        guest.uuid, guest.name, mode, home, source, vcpu_pins, cpus,
        dict.fromkeys(guest.iothread_pins, cpus), rule, reason, nodeset,
        emulator_rule, emulator_reason)


def _untouched(guest: guest_mod.Guest, rule: str, reason: str
               ) -> plan_mod.GuestPlan:
    return plan_mod.GuestPlan(
        uuid=guest.uuid, name=guest.name, mode=plan_mod.UNTOUCHED,
        home_node=None, home_source='none', vcpu_pins={},
        emulator_pin=None, iothread_pins={}, rule=rule, reason=reason)


def release_plan(host: topology.HostTopology,
                 guests: typing.Iterable[guest_mod.Guest],
                 options: Options) -> plan_mod.Plan:
    """Undo binding: every guest the policy would manage goes back on the
    CPUs nova gave it (vCPUs, emulator and I/O threads): its ``<vcpu
    cpuset>`` (nova's ``cpu_shared_set`` when it wrote one), else every
    online CPU; the rest stay untouched. Used to switch the package off
    without restarting guests.

    Never wider than nova's own: libvirt keeps a live ``<vcpupin>`` in
    the live XML (libvirt 9.0 shows ``cpuset='0'`` beside ``<vcpu
    cpuset='0'>``) and so in ``dumpxml --migratable``; every online CPU
    there would take the source's whole CPU list to a live migration's
    destination (its dedicated CPUs, or CPUs it lacks)."""
    validate(host, options)
    everything = host.cpus
    decided = []
    for g in guests:
        why = _untouched_reason(g, options)
        if why and why[0] != 'empty-pool':
            decided.append(_untouched(g, *why))
            continue
        nova_cpus = (g.default_cpuset or frozenset()) & everything
        cpus = nova_cpus or everything
        decided.append(plan_mod.GuestPlan(
            uuid=g.uuid, name=g.name, mode=plan_mod.RELEASED,
            home_node=None, home_source='none',
            vcpu_pins=dict.fromkeys(g.vcpus, cpus),
            emulator_pin=cpus,
            iothread_pins=dict.fromkeys(g.iothread_pins, cpus),
            rule='release', reason=(
                'released: the CPUs nova gave it (<vcpu cpuset>)'
                if nova_cpus else 'released: every online CPU (nova '
                'gave it no <vcpu cpuset>)')))
    return plan_mod.Plan(
        guests=tuple(decided), pool=everything,
        pool_by_node={n: node.cpus for n, node in host.nodes.items()},
        allocation_ratio=float(options.allocation_ratio),
        total_vcpus=sum(len(gp.vcpu_pins) for gp in decided),
        node_vcpus={}, cross_node_vcpus=0)
