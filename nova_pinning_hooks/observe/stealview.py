"""Steal next to the binding that causes it: what ``status`` and ``top``
print, and what their JSON carries.

``Measurement`` joins a plan (mode, pins and home node of each guest, the
pool of each node) with the rates of two vCPU samples (``steal``).
``lines`` draws it for a terminal: the nodes first (vCPU demand against
the node's pool, the worst guest), then one line per guest, worst steal
first, marked ``!`` where its steal reaches the warning threshold; a
``*`` after the mode says the pins in force are not the plan's yet (no
pass has run since the guest changed, or the package is switched off).

Invariants (pure: no I/O, no clock): every guest of the plan gets a line,
measured or not (``-`` where no figure exists: the guest is new or was
restarted during the sample); guests the sample saw but the plan did not
(started after the plan was read) are shown too, with mode ``?``.
"""

import dataclasses
import typing

from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import steal
from nova_pinning_hooks.observe import render
from nova_pinning_hooks.passes import hostport

MARK = '!'
PENDING = '*'  # after the mode: the pins in force are not the plan's yet


@dataclasses.dataclass(frozen=True)
class Measurement:
    wall_seconds: float
    rates: dict[str, steal.GuestRate]  # uuid -> steal.GuestRate
    nodes: list[steal.NodeLoad]
    plans: dict[str, plan_mod.GuestPlan]  # uuid -> plan.GuestPlan
    # uuids whose pins differ from plan
    pending: frozenset[str] = frozenset()


def measure(p: plan_mod.Plan, before: hostport.VcpuSample,
            after: hostport.VcpuSample, wall_seconds: float,
            changes: typing.Iterable[plan_mod.PinChange] = ()
            ) -> Measurement:
    """The Measurement of plan ``p`` over samples ``before``/``after``
    (``virt.Host.vcpu_stats`` dicts) taken ``wall_seconds`` apart;
    ``changes``: the pin changes the plan still needs (marked)."""
    rates = steal.rates(before, after, wall_seconds)
    plans = {gp.uuid: gp for gp in p.guests}
    for gp in p.guests:  # planned but not in the sample: stopped since
        if gp.uuid not in rates:
            rates[gp.uuid] = steal.GuestRate(gp.uuid, gp.name, (), None,
                                             None, None, 0.0, 'gone')
    homes = {uuid: gp.home_node for uuid, gp in plans.items()}
    pools = {n: len(cpus) for n, cpus in p.pool_by_node.items()}
    pending = frozenset(plan_mod.pending_pins(changes))
    return Measurement(wall_seconds, rates, steal.node_load(rates, homes,
                                                            pools), plans,
                       pending)


def _pct(value: typing.Optional[float]) -> str:
    return '-' if value is None else '%.1f' % value


def node_lines(m: Measurement) -> list[str]:
    out = []
    for n in m.nodes:
        where = 'node %d' % n.node if n.node is not None else 'no home node'
        worst = ('worst %s %s %% steal' % (render.printable(n.worst_guest),
                                           _pct(n.worst_steal_pct))
                 if n.worst_guest else 'no guest measured')
        pool = ('pool %d CPUs' % n.pool_cpus if n.node is not None
                else 'cross-node or unplaced')
        out.append('%s: vCPU demand %.2f CPUs, %s, %d guest(s), %s' % (
            where, n.demand_cpus, pool, n.guests, worst))
    return out


def guest_rows(m: Measurement, threshold: float) -> list[str]:
    rows = [('', 'guest', 'mode', 'home', 'pins', 'steal%', 'CPU%',
             'worst vCPU')]
    for r in steal.by_steal(m.rates):
        gp = m.plans.get(r.uuid)
        mark = MARK if (r.steal_pct is not None and
                        r.steal_pct >= threshold) else ''
        rows.append((
            mark, render.printable(r.name),
            '?' if gp is None else
            gp.mode + PENDING if r.uuid in m.pending else gp.mode,
            '-' if gp is None or gp.home_node is None else str(gp.home_node),
            render.pins_text(gp) if gp else '-',
            _pct(r.steal_pct), _pct(r.cpu_pct),
            (_pct(r.worst_vcpu_steal_pct) if r.state == 'measured'
             else r.state if r.steal_pct is None else
             '%s (%s)' % (_pct(r.worst_vcpu_steal_pct), r.state))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = {5, 6}
    return ['  '.join(cell.rjust(w) if i in right else cell.ljust(w)
                      for i, (cell, w) in enumerate(zip(row, widths))
                      ).rstrip() for row in rows]


def lines(m: Measurement, threshold: float) -> list[str]:
    """The nodes, then the guests worst first (see the module doc)."""
    head = ('steal over %.2f s (host side: vCPU run delay / wall time; '
            '%s = at least %g %%%s)' % (
                m.wall_seconds, MARK, threshold,
                '; %s = pins not yet as planned' % PENDING
                if m.pending else ''))
    return [head] + node_lines(m) + [''] + guest_rows(m, threshold)


def to_json(m: Measurement) -> dict[str, typing.Any]:
    """{'interval_seconds', 'guests': {uuid: ...}, 'nodes': [...]}."""
    return {
        'interval_seconds': round(m.wall_seconds, 6),
        'guests': {uuid: {
            'name': r.name, 'state': r.state,
            'steal_pct': r.steal_pct, 'cpu_pct': r.cpu_pct,
            'worst_vcpu_steal_pct': r.worst_vcpu_steal_pct,
            'demand_cpus': round(r.demand_cpus, 6),
            'vcpus': {str(v.vcpu): {'steal_pct': v.steal_pct,
                                    'cpu_pct': v.cpu_pct}
                      for v in r.vcpus}}
            for uuid, r in sorted(m.rates.items())},
        'nodes': [{'node': n.node, 'guests': n.guests,
                   'demand_cpus': round(n.demand_cpus, 6),
                   'pool_cpus': n.pool_cpus, 'worst_guest': n.worst_guest,
                   'worst_steal_pct': n.worst_steal_pct}
                  for n in m.nodes],
    }
