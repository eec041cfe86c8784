"""The guest pool, the totals the rules compare, and the host's layout.

The seed's rules (doc/source/reference/policy.rst), over totals alone:

1. total managed vCPUs > |P| x r: every managed guest -> host range (P);
2. per node n, single-node guests totalling V_n:
   V_n > |P_n| x r on any node -> every managed guest -> host range;
   |P_n| < V_n <= |P_n| x r -> the node's guests -> node range (P_n);
   V_n <= |P_n| -> the node's guests -> one-to-one in P_n;
3. cross-node guests totalling V_X, F = P minus one-to-one pCPUs:
   V_X > |F| x r -> every managed guest -> host range; else -> range on F.

Invariants:

* the pool P is the host's online CPUs less the reserved and dedicated
  ones and the pCPUs nova dedicated to the guests it placed, within
  ``cpu_shared_set`` when that is known (``guest_pool``);
* nova-placed vCPUs that float over pool CPUs never take CPUs out: they
  count as load on the nodes they float over (``nova_load``), and no
  node they float over is one-to-one;
* the rules see only counts (``decide_sizes``), so the scheduler's
  forecast (``summary``) decides exactly as a pass does; a ``Layout``
  carries a rule and reason that name the rule and the node, never a
  count.
"""

import typing

from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import names
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import topology
from nova_pinning_hooks.engine.policy import options as options_mod

EPSILON = options_mod.EPSILON
EMPTY_POOL = ('the guest pool is empty: every CPU is reserved or '
              'dedicated')


def guest_pool(host: topology.HostTopology,
               guests: typing.Iterable[guest_mod.Guest],
               options: options_mod.Options) -> frozenset[int]:
    """The guest pool P (doc/source/reference/policy.rst, "Terms")."""
    pool = set(host.cpus)
    for cpus in (options.reserved_cpus, options.dedicated_cpus):
        pool -= cpus or set()
    for g in guests:
        if g.active and g.nova_placed:
            pool -= g.exclusive_cpus(options.dedicated_cpus)
    if options.shared_cpus is not None:
        pool &= options.shared_cpus
    return frozenset(pool)


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


class Kind(names.Name):
    """What the rules decided for the host as a whole."""
    NONE = 'none'  # no managed guest
    EMPTY_POOL = 'empty-pool'
    HOST = 'host'  # every managed guest on the host range
    NODES = 'nodes'  # each node one-to-one or a node range


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

    kind: Kind
    rule: typing.Optional[plan_mod.Rule] = None
    reason: typing.Optional[str] = None
    # ((node, mode), ...) in node order
    modes: tuple[tuple[int, plan_mod.Mode], ...] = ()
    # Totals.nova_nodes, ``nodes``
    nova_nodes: frozenset[int] = frozenset()

    def mode_of(self, node: typing.Optional[int]) -> plan_mod.Mode:
        """How a guest homed on ``node`` is bound under this layout
        (None: a cross-node guest)."""
        if self.kind == Kind.HOST:
            return plan_mod.HOST_RANGE
        if self.kind != Kind.NODES:
            return plan_mod.UNTOUCHED
        if node is None:
            return plan_mod.CROSS_NODE_RANGE
        return dict(self.modes)[node]


def decide(pool: frozenset[int], pool_by_node: dict[int, frozenset[int]],
           rules: options_mod.Rules, totals: Totals, managed: int
           ) -> Layout:
    """The layout for these totals (the seed's rules 1 to 3);
    ``managed``: how many guests are managed."""
    return decide_sizes(len(pool), {n: len(p) for n, p in
                                    pool_by_node.items()},
                        rules, totals, managed)


def decide_sizes(pool: int, node_sizes: typing.Mapping[int, int],
                 rules: options_mod.Rules, totals: Totals, managed: int
                 ) -> Layout:
    """``decide`` on counts alone: ``pool`` pCPUs in all, ``node_sizes``
    node -> its pool pCPUs (in node order). The rules read nothing else,
    so the scheduler's forecast (``summary``) decides as a pass does."""
    ratio = rules.ratio
    if not managed:
        return Layout(Kind.NONE)
    if not pool:
        return Layout(Kind.EMPTY_POOL, plan_mod.Rule.EMPTY_POOL, EMPTY_POOL)
    if totals.total > pool * ratio + EPSILON:
        return Layout(Kind.HOST, plan_mod.Rule.HOST_OVERSUBSCRIBED,
                      'host oversubscribed: its vCPUs exceed the guest '
                      'pool x ratio')
    for node, size in node_sizes.items():
        if totals.node_vcpus[node] > size * ratio + EPSILON:
            return Layout(Kind.HOST, plan_mod.Rule.NODE_OVERSUBSCRIBED,
                          'node %d oversubscribed: its vCPUs exceed its '
                          'pool x ratio' % node)
    modes, one_to_one = [], 0
    for node, size in node_sizes.items():
        v_n = totals.node_vcpus[node]
        if v_n <= size and node not in totals.nova_nodes:
            modes.append((node, plan_mod.Mode.DEDICATED))
            one_to_one += v_n  # one pCPU each
        else:
            modes.append((node, plan_mod.Mode.NODE_RANGE))
    if totals.cross > (pool - one_to_one) * ratio + EPSILON:
        return Layout(Kind.HOST, plan_mod.Rule.CROSS_OVERSUBSCRIBED,
                      'cross-node guests oversubscribed: their vCPUs '
                      'exceed the pCPUs without one-to-one binding x ratio')
    return Layout(Kind.NODES, modes=tuple(modes),
                  nova_nodes=totals.nova_nodes)


def nova_load(host: topology.HostTopology,
              guests: typing.Iterable[guest_mod.Guest], pool: frozenset[int],
              options: options_mod.Options) -> Totals:
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
