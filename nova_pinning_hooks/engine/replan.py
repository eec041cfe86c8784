"""Incremental planning: the last plan brought up to date for what changed.

A long-lived reconciler (the agent, the nova plugin) plans the same host
pass after pass, and most passes follow a change to one guest. Planning
the whole host again costs time in proportion to every guest on it; a
``Planner`` keeps the ``policy.make.State`` of its last plan and plans again
only what the change can affect:

* the changed guests' facts (untouched or managed, home node) are read
  again and their vCPUs moved between the totals; the layout (rules 1 to
  3) is decided again from the totals, a few sums;
* the same host-wide layout (host range, empty pool): only the changed
  guests are planned again;
* the same layout by node: a one-to-one node that gained, lost or
  changed a guest, or whose mode changed, is assigned again (its guests
  keep their pCPUs: ``assign`` is sticky; at most one guest per pCPU of
  the node); on a node-range node only the changed guests are planned
  again, unless its mode changed; the cross-node guests are planned again
  all when the pCPUs left without one-to-one binding changed, otherwise
  only the changed ones;
* anything else plans the whole host, as ``policy.make_plan``: the first
  plan, another host or other options, a change to a nova-placed guest
  (the pool), a layout of another kind or rule, and hosts where a home
  depends on the other guests (read from pins alone, or yet to be
  chosen: ``policy.homes.order_dependent``).

Invariants:

* the plan equals ``policy.make_plan`` for the same host, guests and
  options (``tests/unit/engine/test_replan.py`` checks it over random hosts and
  sequences of changes);
* ``scope``: the uuids whose guest or plan may differ from the last
  confirmed plan's (None: every guest). A guest outside it has the
  Guest and GuestPlan it had then, and no change then (see ``confirm``):
  its pins already match, and the diff may skip it;
* a plan is made from the last *confirmed* one: ``confirm`` once every
  guest with a change in it will be read again (written, or skipped and
  marked), so that it is among the changed guests next time; a plan
  left unconfirmed (dry run, a pass that failed before that, a plan
  made outside a pass) makes the next one plan the whole host, because
  what the caller reports as changed is only relative to the plan
  before;
* pure and single-threaded: no I/O; the caller serialises its calls
  (the reconciler holds its pass lock).
"""

import typing

from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine.policy import homes as homes_mod
from nova_pinning_hooks.engine.policy import layout as layout_mod
from nova_pinning_hooks.engine.policy import make
from nova_pinning_hooks.engine.policy import options as options_mod
from nova_pinning_hooks.engine.policy import placement
from nova_pinning_hooks.engine import topology

# (make.State, (host, options)) of a plan.
_Based = tuple[make.State,
               tuple[topology.HostTopology, options_mod.Options]]
# The (GuestPlan, Guest) pairs whose pins may differ (``plan.changes``).
_Pairs = list[tuple[plan_mod.GuestPlan, guest_mod.Guest]]


class Planner:
    """The plan of one host, kept up to date pass after pass."""

    def __init__(self) -> None:
        # (make.State, key) of the confirmed plan
        self._state: typing.Optional[_Based] = None
        # the same for the plan not yet confirmed
        self._pending: typing.Optional[_Based] = None
        self.whole = 0  # plans made for the whole host (for tests)

    def reset(self) -> None:
        """Plan the whole host next time."""
        self._state = self._pending = None

    def confirm(self) -> None:
        """Every guest with a change in the last plan will be read again:
        the next plan builds on this one."""
        if self._pending is not None:
            self._state, self._pending = self._pending, None

    def plan(self, host: topology.HostTopology,
             guests: typing.Sequence[guest_mod.Guest],
             options: options_mod.Options,
             changed: typing.Optional[
                 typing.Mapping[str, guest_mod.Guest]] = None,
             removed: typing.Collection[str] = ()
             ) -> tuple[plan_mod.Plan, typing.Optional[_Pairs]]:
        """(plan, scope) for ``guests`` (all of them, ``Guest``).

        ``changed``: {uuid: Guest} of the guests that are new or differ
        since the previous call (None: unknown); ``removed``: the uuids
        gone since then. ``scope``: the (GuestPlan, Guest) pairs whose
        pins may differ (``plan.changes``'s ``pairs``), or None: all."""
        key = (host, options)
        # The confirmed state is consumed (updated in place) whatever
        # happens next; only ``confirm`` makes a state the next base.
        base = self._state if self._pending is None else None
        self._state = self._pending = None
        result: typing.Optional[tuple[plan_mod.Plan, make.State,
                                      typing.Optional[set[str]]]] = None
        if base is not None and changed is not None and base[1] == key:
            result = _update(base[0], host, guests, options, changed,
                             removed)
        if result is None:
            self.whole += 1
            p, state = make.plan_with_state(host, guests, options)
            result = p, state, None
        scope: typing.Union[set[str], _Pairs, None]  # uuids, then pairs
        p, state, scope = result
        self._pending = (state, key)
        if scope is not None:
            scope = [(state.plans[u], state.guests[u]) for u in scope
                     if u in state.plans]
        return p, scope


def _update(state: make.State, host: topology.HostTopology,
            guests: typing.Sequence[guest_mod.Guest],
            options: options_mod.Options,
            changed: typing.Mapping[str, guest_mod.Guest],
            removed: typing.Collection[str]
            ) -> typing.Optional[tuple[plan_mod.Plan, make.State,
                                       set[str]]]:
    """(plan, state, scope) brought up to date, or None where only a
    whole-host plan can tell. ``state`` is consumed."""
    for uuid in list(removed) + list(changed):
        why = state.why.get(uuid)
        if why is not None and why[0] == plan_mod.Rule.NOVA_PLACED:
            return None  # its pCPUs were out of the pool
    if any(g.active and g.nova_placed for g in changed.values()):
        return None  # its pCPUs leave the pool
    if state.dependent_homes:
        return None  # homes decided together: the whole host
    pool, pool_by_node = state.pool, state.pool_by_node
    members, cross, homes = state.members, state.cross, state.homes
    node_vcpus = dict(state.totals.node_vcpus)
    cross_vcpus = state.totals.cross
    touched = set()  # nodes that gained or lost a single-node guest
    for uuid in set(removed).union(changed):
        old = state.guests.pop(uuid, None)
        if old is None:
            continue
        state.plans.pop(uuid, None)
        if state.why.pop(uuid) is not None:
            continue
        del state.facts[uuid]
        node = homes.pop(uuid)[0]
        if node is None:
            del cross[uuid]
            cross_vcpus -= old.vcpu_count
        else:
            del members[node][uuid]
            node_vcpus[node] -= old.vcpu_count
            touched.add(node)
    for uuid, g in changed.items():
        state.guests[uuid] = g
        state.why[uuid] = why = homes_mod.untouched_reason(g, options)
        if why is not None:
            state.plans[uuid] = placement.untouched_plan(g, *why)
            continue
        fact = homes_mod.home_from_facts(g, host, pool_by_node, options)
        if homes_mod.order_dependent(fact):
            return None
        state.facts[uuid] = fact
        node = fact[0]
        homes[uuid] = (node, fact[1])
        if node is None:
            cross[uuid] = None
            cross_vcpus += g.vcpu_count
        else:
            members[node][uuid] = None
            node_vcpus[node] += g.vcpu_count
            touched.add(node)
    ratio = float(options.allocation_ratio)
    # nova's own load (``policy.layout.nova_load``) stays in the totals: a
    # nova-placed guest that changed planned the whole host above.
    totals = state.totals._replace(
        total=sum(node_vcpus.values()) + cross_vcpus,
        node_vcpus=node_vcpus, cross=cross_vcpus)
    layout = layout_mod.decide(pool, pool_by_node, options.rules(), totals,
                               len(state.facts))
    old_layout = state.layout
    if layout.kind != old_layout.kind or \
            (layout.kind != layout_mod.Kind.NODES and layout != old_layout):
        return None  # everyone's pins change: nothing to keep
    scope = set(removed).union(changed)
    managed = [(u, g) for u, g in changed.items() if state.why[u] is None]
    one_to_one, free = state.one_to_one, state.free
    if layout.kind in (layout_mod.Kind.HOST, layout_mod.Kind.EMPTY_POOL):
        for uuid, g in managed:
            state.plans[uuid] = placement.host_plan(g, layout, pool, homes,
                                                 options)
    elif layout.kind == layout_mod.Kind.NODES:
        one_to_one = dict(one_to_one)
        rebuilt: set[str]
        before, rebuilt = dict(old_layout.modes), set()
        for node, mode in layout.modes:
            if before[node] == mode and (mode != plan_mod.DEDICATED or
                                         node not in touched):
                continue
            section = placement.node_plans(
                host, node, mode, pool_by_node[node],
                [state.guests[u] for u in members[node]], homes, options,
                node in layout.nova_nodes)
            state.plans.update(section)
            rebuilt.update(section)
            if mode == plan_mod.DEDICATED:
                one_to_one[node] = placement.dedicated_cpus(section.values())
            else:
                one_to_one.pop(node, None)
        for uuid, g in managed:
            node = homes[uuid][0]
            if node is not None and uuid not in rebuilt:
                # A node range that kept its mode: the others stay.
                state.plans[uuid] = placement.node_plans(
                    host, node, plan_mod.NODE_RANGE, pool_by_node[node],
                    [g], homes, options, node in layout.nova_nodes)[uuid]
        free = pool.difference(*one_to_one.values())
        # Cross-node guests share the pCPUs without one-to-one binding:
        # all of them move when those change.
        again = list(cross) if free != state.free else \
            [u for u, _ in managed if u in cross]
        for uuid in again:
            state.plans[uuid] = placement.cross_plan(state.guests[uuid], free,
                                                  homes, options)
        scope.update(rebuilt, again)
    state = state._replace(totals=totals, layout=layout,
                           one_to_one=one_to_one, free=free)
    return make.plan_of(state, guests, ratio, options), state, scope
