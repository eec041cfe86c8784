"""The policy's entry points: a whole host's plan, and the release plan.

``make_plan(host, guests, options)`` decides, for every guest, a mode, a
home node and the pCPUs of each of its threads, stage by stage: the
options checked (``options``), who is managed and each home
(``homes``), the pool, the totals and the layout (``layout``), then each
guest's pins (``placement``). ``plan_with_state`` also returns the
``State`` the plan was made from, for ``replan``.

Invariants:

* only live guests are bound; nova-placed guests (instance NUMA topology)
  and, if so configured, foreign domains are ``untouched``; the pCPUs
  nova dedicated (``Guest.exclusive_cpus``: in ``cpu_dedicated_set``
  when that is known) leave the pool;
* deterministic, and stable: see ``assign`` for what one-to-one guests
  keep; a plan made again after one guest changed leaves every section
  it did not touch as it was: ``replan`` relies on it;
* a plan lists its guests in the order they were given;
* ``release_plan`` never pins wider than nova's own CPUs for a guest.
"""

import operator
import typing

from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import topology
from nova_pinning_hooks.engine.policy import homes as homes_mod
from nova_pinning_hooks.engine.policy import layout as layout_mod
from nova_pinning_hooks.engine.policy import options as options_mod
from nova_pinning_hooks.engine.policy import placement

Options = options_mod.Options


def make_plan(host: topology.HostTopology,
              guests: typing.Sequence[guest_mod.Guest],
              options: Options) -> plan_mod.Plan:
    """The plan for ``guests`` (``Guest`` objects) on ``host``."""
    return plan_with_state(host, guests, options)[0]


class State(typing.NamedTuple):
    """What a plan was made from and how, beyond the plan itself: what
    ``replan`` needs to bring it up to date for a few changed guests."""

    pool: frozenset[int]
    pool_by_node: dict[int, frozenset[int]]
    guests: dict[str, guest_mod.Guest]  # uuid -> Guest
    # uuid -> (rule, reason) for untouched guests, else None
    why: dict[str, typing.Optional[homes_mod.Reason]]
    # uuid -> (node, source, cross) for managed guests
    facts: dict[str, homes_mod.Fact]
    homes: dict[str, homes_mod.Home]  # uuid -> (home node or None, source)
    totals: layout_mod.Totals
    layout: layout_mod.Layout
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
    options_mod.validate(host, options)
    ratio = float(options.allocation_ratio)
    pool = layout_mod.guest_pool(host, guests, options)
    pool_by_node = {n: node.cpus & pool for n, node in host.nodes.items()}
    load = layout_mod.nova_load(host, guests, pool, options)
    why, facts, managed = {}, {}, []
    for g in guests:
        why[g.uuid] = reason = homes_mod.untouched_reason(g, options)
        if reason is None:
            managed.append(g)
            facts[g.uuid] = homes_mod.home_from_facts(
                g, host, pool_by_node, options)
    rules = options.rules()
    homes = homes_mod.place(host, managed, pool_by_node, options, rules,
                            facts, load.node_vcpus)
    members: dict[int, dict[str, None]] = {n: {} for n in host.nodes}
    cross: dict[str, None] = {}
    for g in managed:
        home = homes[g.uuid][0]
        (cross if home is None else members[home])[g.uuid] = None
    by_uuid = {g.uuid: g for g in guests}
    totals = layout_mod.totals_of(by_uuid, members, cross, load)
    layout = layout_mod.decide(pool, pool_by_node, rules, totals,
                               len(managed))
    plans = {}
    for g in guests:
        if why[g.uuid] is not None:
            plans[g.uuid] = placement.untouched_plan(
                g, *typing.cast(homes_mod.Reason, why[g.uuid]))
    one_to_one, free = {}, pool
    if layout.kind == layout_mod.Kind.NODES:
        for node, mode in layout.modes:
            section = placement.node_plans(
                host, node, mode, pool_by_node[node],
                [by_uuid[u] for u in members[node]], homes, options,
                node in layout.nova_nodes)
            plans.update(section)
            if mode == plan_mod.Mode.DEDICATED:
                one_to_one[node] = placement.dedicated_cpus(
                    section.values())
        free = pool.difference(*one_to_one.values())
        for u in cross:
            plans[u] = placement.cross_plan(by_uuid[u], free, homes,
                                            options)
    elif layout.kind != layout_mod.Kind.NONE:
        for g in managed:
            plans[g.uuid] = placement.host_plan(g, layout, pool, homes,
                                                options)
    state = State(pool, pool_by_node, by_uuid, why, facts, homes, totals,
                  layout, members, cross, one_to_one, free, plans,
                  sum(map(homes_mod.order_dependent, facts.values())))
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
    options_mod.validate(host, options)
    everything = host.cpus
    decided = []
    for g in guests:
        why = homes_mod.untouched_reason(g, options)
        if why is not None:
            decided.append(placement.untouched_plan(g, *why))
            continue
        nova_cpus = (g.default_cpuset or frozenset()) & everything
        cpus = nova_cpus or everything
        decided.append(plan_mod.GuestPlan(
            uuid=g.uuid, name=g.name, mode=plan_mod.Mode.RELEASED,
            home_node=None, home_source=plan_mod.HomeSource.NONE,
            vcpu_pins=dict.fromkeys(g.vcpus, cpus),
            emulator_pin=cpus,
            iothread_pins=dict.fromkeys(g.iothread_pins, cpus),
            rule=plan_mod.Rule.RELEASE, reason=(
                'released: the CPUs nova gave it (<vcpu cpuset>)'
                if nova_cpus else 'released: every online CPU (nova '
                'gave it no <vcpu cpuset>)')))
    return plan_mod.Plan(
        guests=tuple(decided), pool=everything,
        pool_by_node={n: node.cpus for n, node in host.nodes.items()},
        allocation_ratio=float(options.allocation_ratio),
        total_vcpus=sum(len(gp.vcpu_pins) for gp in decided),
        node_vcpus={}, cross_node_vcpus=0)
