"""Steal from the host's side: two samples of vCPU counters, as rates.

A *sample* is what ``virt.Host.vcpu_stats`` reads in one bulk libvirt
call: for every running guest (by uuid) its name and, per vCPU, two
cumulative counters in nanoseconds:

* ``time``: the vCPU thread ran on a host CPU;
* ``delay``: the vCPU thread was runnable but waited for a host CPU.
  This is what the guest sees as *steal* (KVM feeds the guest's
  ``MSR_KVM_STEAL_TIME`` from the same run-delay of the vCPU thread).

``rates(before, after)`` turns two samples into, per guest and per vCPU,
**steal %** (delay / wall time) and **CPU %** (time / wall time); a
guest's figures are over all its measured vCPUs (100 % = every vCPU busy
the whole interval), with its worst vCPU's steal beside them.
``node_load`` sums guests per NUMA node: their **demand** (vCPUs that
wanted to run: (time + delay) / wall, in CPUs) against the node's pool,
and the worst guest steal on it.

Invariants (pure: no I/O, no clock):

* a figure is only computed from two readings of the *same* counter:
  a guest or vCPU present in one sample only (started, stopped, vCPU
  hot-plugged or unplugged) gets no figure for that vCPU; a guest whose
  counters went backwards (restarted under the same uuid) is *new*, with
  no figures, never a negative or huge rate;
* a guest with no vCPU measured in both samples is listed with
  ``steal_pct`` and ``cpu_pct`` None, never dropped silently;
* a vCPU's rates are clamped to [0, 100] % and its demand to one CPU (a
  counter that ran ahead of the wall clock by rounding never shows
  more);
* an interval that is not positive yields no figures at all.
"""

import dataclasses
import typing

NS = 1e9

# One guest of a sample: {'name': name, 'vcpus': {index: {'time': ns,
# 'delay': ns}}}, as libvirt's bulk stats give it.
_Counters = typing.Mapping[str, typing.Any]


@dataclasses.dataclass(frozen=True)
class VcpuRate:
    vcpu: int
    steal_pct: float
    cpu_pct: float


@dataclasses.dataclass(frozen=True)
class GuestRate:
    uuid: str
    name: str
    vcpus: tuple[VcpuRate, ...]  # by vCPU index
    # None when nothing was measured
    steal_pct: typing.Optional[float]
    cpu_pct: typing.Optional[float]
    worst_vcpu_steal_pct: typing.Optional[float]
    demand_cpus: float  # (time + delay) / wall over its vCPUs, in CPUs
    state: str  # 'measured' | 'new' (appeared or restarted) | 'partial'


@dataclasses.dataclass(frozen=True)
class NodeLoad:
    node: typing.Optional[int]  # None for guests without a home node
    guests: int
    demand_cpus: float
    pool_cpus: int
    worst_guest: typing.Optional[str]  # name
    worst_steal_pct: typing.Optional[float]


def _pct(delta_ns: float, wall_s: float) -> float:
    return min(100.0, max(0.0, 100.0 * delta_ns / (wall_s * NS)))


def _guest_rate(uuid: str, old: typing.Optional[_Counters],
                new: _Counters, wall: float) -> GuestRate:
    old_vcpus = old.get('vcpus', {}) if old else {}
    new_vcpus = new.get('vcpus', {})
    rates: list[VcpuRate]
    rates, demand, state = [], 0.0, 'measured'
    if old is None:
        state = 'new'
    else:
        for index in sorted(new_vcpus):
            if index not in old_vcpus:
                state = 'partial'  # hot-plugged since the first sample
                continue
            a, b = old_vcpus[index], new_vcpus[index]
            dt = b['time'] - a['time']
            dd = b['delay'] - a['delay']
            if dt < 0 or dd < 0:
                # Counters went backwards: the guest was restarted.
                rates, demand, state = [], 0.0, 'new'
                break
            rates.append(VcpuRate(index, _pct(dd, wall), _pct(dt, wall)))
            demand += min(1.0, (dt + dd) / (wall * NS))
        if state != 'new' and set(old_vcpus) - set(new_vcpus):
            state = 'partial'  # unplugged since the first sample
    steal: typing.Optional[float]
    cpu: typing.Optional[float]
    worst: typing.Optional[float]
    if rates:
        steal = sum(r.steal_pct for r in rates) / len(rates)
        cpu = sum(r.cpu_pct for r in rates) / len(rates)
        worst = max(r.steal_pct for r in rates)
    else:
        steal = cpu = worst = None
    return GuestRate(uuid, new.get('name', uuid), tuple(rates), steal, cpu,
                     worst, demand, state)


def rates(before: typing.Mapping[str, _Counters],
          after: typing.Mapping[str, _Counters],
          wall_seconds: typing.Optional[float]) -> dict[str, GuestRate]:
    """{uuid: GuestRate} for every guest in ``after`` (see the module
    doc). Guests only in ``before`` have gone: they are left out."""
    if not wall_seconds or wall_seconds <= 0:
        return {uuid: GuestRate(uuid, g.get('name', uuid), (), None, None,
                                None, 0.0, 'new')
                for uuid, g in after.items()}
    return {uuid: _guest_rate(uuid, before.get(uuid), g, wall_seconds)
            for uuid, g in after.items()}


def node_load(guest_rates: typing.Mapping[str, GuestRate],
              home_nodes: typing.Mapping[str, typing.Optional[int]],
              pools: typing.Mapping[int, int]) -> list[NodeLoad]:
    """[NodeLoad] per node of ``pools`` ({node: pool CPU count}), then
    one for guests without a home node (node None) if there are any.

    ``home_nodes``: {uuid: node or None}; guests not in it count as
    without a home node."""
    by_node: dict[typing.Optional[int], list[GuestRate]] = {
        node: [] for node in sorted(pools)}
    for uuid, rate in guest_rates.items():
        node = home_nodes.get(uuid)
        by_node.setdefault(node if node in pools else None, []).append(rate)
    result = []
    for node, members in by_node.items():
        measured = [r for r in members if r.steal_pct is not None]
        worst = min(measured, key=lambda r: (  # measured: never None
            -typing.cast(float, r.steal_pct), r.name), default=None)
        result.append(NodeLoad(
            node, len(members), sum(r.demand_cpus for r in members),
            pools.get(node, 0),  # type: ignore[arg-type]  # None: 0
            worst.name if worst else None,
            worst.steal_pct if worst else None))
    return result


def by_steal(guest_rates: typing.Mapping[str, GuestRate]
             ) -> list[GuestRate]:
    """Guests worst first: highest steal, unmeasured last, then name."""
    return sorted(guest_rates.values(), key=lambda r: (
        r.steal_pct is None, -(r.steal_pct or 0.0), r.name, r.uuid))
