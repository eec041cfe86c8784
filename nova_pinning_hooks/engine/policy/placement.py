"""Each guest's plan under a layout: the pCPUs of each of its threads.

Invariants:

* every pin lies in the pool P; one-to-one pCPUs serve one vCPU each and
  never span nodes (``assign``); emulator and I/O threads follow the
  guest's vCPUs, or, one-to-one with ``emulator_threads = shared``,
  float over the home node's pool CPUs no one-to-one vCPU holds
  (``emuthreads``);
* a guest's plan depends only on the layout, its own facts, its home
  and, one-to-one, the other guests of its node: a section (a node's
  guests, the cross-node guests) planned again from the same inputs is
  the same, which ``replan`` relies on;
* reasons name the rule and the node, never a count;
* a numa nodeset is planned only with ``set_home_node`` and only for a
  home chosen or read from pins (memory not placed yet).
"""

import typing

from nova_pinning_hooks.engine import assign
from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import topology
from nova_pinning_hooks.engine.policy import homes as homes_mod
from nova_pinning_hooks.engine.policy import layout as layout_mod
from nova_pinning_hooks.engine.policy import options as options_mod

Home = homes_mod.Home
Options = options_mod.Options

NODE_REASONS = {
    plan_mod.Mode.DEDICATED: (plan_mod.Rule.ONE_TO_ONE,
                              'node %d has room: its vCPUs fit its pool '
                              'one-to-one'),
    plan_mod.Mode.NODE_RANGE: (plan_mod.Rule.NODE_RANGE,
                               'node %d shared: more vCPUs than its pool, '
                               'within pool x ratio'),
}
# A node nova-placed shared vCPUs float over: its pCPUs serve them too,
# so none of them can be one guest's alone.
NOVA_SHARED_REASON = (plan_mod.Rule.NODE_RANGE,
                      'node %d shared: guests nova placed (shared policy, '
                      'a NUMA topology) float over its pool; within pool '
                      'x ratio')
CROSS_REASON = (plan_mod.Rule.CROSS_NODE_RANGE,
                'memory on several nodes: a range on the pCPUs '
                'without one-to-one binding')


def node_plans(host: topology.HostTopology, node: int, mode: plan_mod.Mode,
               node_pool: frozenset[int],
               members: typing.Sequence[guest_mod.Guest],
               homes: typing.Mapping[str, Home], options: Options,
               nova_shared: bool = False
               ) -> dict[str, plan_mod.GuestPlan]:
    """uuid -> GuestPlan for the single-node guests of ``node``;
    ``nova_shared``: nova-placed vCPUs float over its pool too."""
    rule, reason = (NOVA_SHARED_REASON if nova_shared and
                    mode == plan_mod.Mode.NODE_RANGE else NODE_REASONS[mode])
    reason %= node
    if mode == plan_mod.Mode.NODE_RANGE:
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
               homes: typing.Mapping[str, Home], options: Options
               ) -> plan_mod.GuestPlan:
    """The plan of a cross-node guest: a range on ``free``, the pool's
    pCPUs without one-to-one binding."""
    return _ranged(guest, homes, plan_mod.Mode.CROSS_NODE_RANGE, free,
                   *CROSS_REASON, options)


def host_plan(guest: guest_mod.Guest, layout: layout_mod.Layout,
              pool: frozenset[int], homes: typing.Mapping[str, Home],
              options: Options) -> plan_mod.GuestPlan:
    """The plan of a managed guest under a host-wide layout."""
    # Every layout but ``none`` (which plans no guest) has both.
    rule = typing.cast(plan_mod.Rule, layout.rule)
    reason = typing.cast(str, layout.reason)
    if layout.kind == layout_mod.Kind.EMPTY_POOL:
        return untouched_plan(guest, rule, reason)
    return _ranged(guest, homes, plan_mod.Mode.HOST_RANGE, pool, rule,
                   reason, options)


def _ranged(guest: guest_mod.Guest, homes: typing.Mapping[str, Home],
            mode: plan_mod.Mode, cpus: frozenset[int], rule: plan_mod.Rule,
            reason: str, options: Options) -> plan_mod.GuestPlan:
    # Range guests keep their emulator and I/O threads on their range
    # with either setting (``emuthreads``).
    return _bound(guest, homes, mode, dict.fromkeys(guest.vcpus, cpus),
                  (cpus,) + emuthreads.with_vcpus(options.emulator_threads),
                  rule, reason, options)


def _bound(guest: guest_mod.Guest, homes: typing.Mapping[str, Home],
           mode: plan_mod.Mode, vcpu_pins: dict[int, frozenset[int]],
           emulator: tuple[frozenset[int], emuthreads.Rule, str],
           rule: plan_mod.Rule,
           reason: str, options: Options) -> plan_mod.GuestPlan:
    """``emulator``: where the guest's emulator and I/O threads run and
    why, an ``emuthreads.Placement`` or the same as a plain tuple."""
    home, source = homes[guest.uuid]
    nodeset = None
    if options.set_home_node and home is not None and \
            source in (plan_mod.HomeSource.CHOSEN, plan_mod.HomeSource.PINS):
        # Memory not placed yet: give it the home node too, so that
        # the home survives a later host range (pins then say nothing).
        nodeset = frozenset((home,))
    # Positional: a plan of a thousand guests builds a thousand of these.
    cpus, emulator_rule, emulator_reason = emulator
    return plan_mod.GuestPlan(
        guest.uuid, guest.name, mode, home, source, vcpu_pins, cpus,
        dict.fromkeys(guest.iothread_pins, cpus), rule, reason, nodeset,
        emulator_rule, emulator_reason)


def untouched_plan(guest: guest_mod.Guest, rule: plan_mod.Rule, reason: str
                   ) -> plan_mod.GuestPlan:
    """The plan of a guest the policy leaves as it is."""
    return plan_mod.GuestPlan(
        uuid=guest.uuid, name=guest.name, mode=plan_mod.Mode.UNTOUCHED,
        home_node=None, home_source=plan_mod.HomeSource.NONE,
        vcpu_pins={},
        emulator_pin=None, iothread_pins={}, rule=rule, reason=reason)
