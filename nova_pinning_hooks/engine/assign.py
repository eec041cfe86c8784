"""One-to-one assignment of vCPUs to the pCPUs of one NUMA node.

``assign_node`` is called only when the node's guests fit (V_n <= |P_n|),
so every vCPU gets a pCPU of its own.

Invariants of the result:

* every pCPU is in the node's pool and serves exactly one vCPU;
* sticky: a vCPU whose current pin is a single pCPU of the pool, not
  claimed by a guest earlier in uuid order, keeps it;
* whole cores before half cores: a guest's new pCPUs are taken first from
  cores where it already runs, then as whole free cores, and only the
  remainder from partly used cores (best fit) before a whole core is
  broken; the vCPUs that share a core are numbered next to each other;
* deterministic: guests are served in a fixed order (most new vCPUs
  first, then uuid), cores in order of their lowest CPU id;
* one L3 domain (a node with several, from the host's cache banks): a
  guest's new pCPUs come from one L3 domain whenever one has enough free
  pCPUs: the domain of its kept pCPUs if that one has room, otherwise
  the best fit (a domain that holds it in whole free cores before one
  that does not, then the fewest free pCPUs, so that large holes stay
  for large guests); when none has room, from the fewest domains (most
  free first). Kept pins are never moved to improve alignment. A guest
  whose pCPUs span domains gets a reason (``split``). On a node with one
  domain (every node of a host without banks) the pick is exactly the
  one made before domains were known.

Compared to Kubernetes' ``takeByTopology`` (sockets, then cores, then
threads, for one container at a time), this keeps existing pins (a
container's CPUs never move there either, but here a guest that grew only
gets the difference) and fills half-used cores before breaking new ones.
"""

import typing

from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import topology

# What ``assign_node``'s ``trace`` receives for each guest.
_Trace = tuple[str, int, set[int], dict[frozenset[int], int]]


def assign_node(host: topology.HostTopology, pool: frozenset[int],
                guests: typing.Sequence[guest_mod.Guest],
                trace: typing.Optional[list[_Trace]] = None
                ) -> tuple[dict[str, dict[int, int]], dict[str, str]]:
    """Map each guest's vCPUs to single pCPUs of ``pool`` (one node).

    Returns ``({uuid: {vcpu: cpu}}, {uuid: why})``, the second for guests
    whose pCPUs span L3 domains. Raises ValueError if the vCPUs do not
    fit, which the policy never lets happen. ``trace`` (a list, for
    tests) receives ``(uuid, new vCPUs, kept pCPUs, {domain: free pCPUs})``
    before each guest's new pCPUs are picked.
    """
    need = sum(g.vcpu_count for g in guests)
    if need > len(pool):
        raise ValueError('%d vCPUs do not fit %d pCPUs' % (need, len(pool)))
    taken = set()
    result = {}
    for guest in sorted(guests, key=lambda g: g.uuid):
        kept = {}
        for vcpu in guest.vcpus:
            pin = guest.vcpu_pin(vcpu)
            if pin is not None and len(pin) == 1:
                cpu = next(iter(pin))
                if cpu in pool and cpu not in taken:
                    kept[vcpu] = cpu
                    taken.add(cpu)
        result[guest.uuid] = kept
    cores = host.cores(pool)  # whole cores: all online siblings
    domains = [d & pool for d in host.l3_domains(pool)] if host.l3_of \
        else []
    order = sorted(guests, key=lambda g: (len(result[g.uuid]) -
                                          g.vcpu_count, g.uuid))
    # Each domain's cores, sorted once: every guest's pick reads them.
    domain_cores = {d: host.cores(d) for d in domains} \
        if len(domains) > 1 else {}
    split = {}
    for guest in order:
        kept = result[guest.uuid]
        missing = [v for v in guest.vcpus if v not in kept]
        if not missing:
            continue
        area, area_cores = pool, cores
        if trace is not None:
            trace.append((guest.uuid, len(missing), set(kept.values()),
                          {d: len(d - taken) for d in domains}))
        if len(domains) > 1:
            area, why = _l3_area(len(missing), domains, domain_cores,
                                 taken, set(kept.values()))
            area_cores = domain_cores.get(area) or host.cores(area)
            if why:
                split[guest.uuid] = why
        picked = _take(len(missing), area_cores, area, taken,
                       own=set(kept.values()), core_of=host.core_of)
        taken.update(picked)
        kept.update(zip(missing, picked))
    if len(domains) > 1:
        for uuid, pins in result.items():
            spans = {host.l3_of[c] for c in pins.values()}
            if len(spans) > 1:
                split.setdefault(uuid, 'its kept pCPUs are in %d L3 '
                                 'domains' % len(spans))
            else:
                split.pop(uuid, None)
    return result, split


def _l3_area(count: int, domains: list[frozenset[int]],
             domain_cores: dict[frozenset[int], list[frozenset[int]]],
             taken: set[int], own: set[int]
             ) -> tuple[frozenset[int], typing.Optional[str]]:
    """(the pCPUs to take ``count`` from, why they span L3 domains);
    ``domain_cores``: each domain's cores."""
    free = {d: d - taken for d in domains}  # once: read several times
    if own:
        home = [d for d in domains if d & own]
        if len(home) == 1 and len(free[home[0]]) >= count:
            return home[0], None
    fits = [d for d in domains if len(free[d]) >= count]
    if fits:
        def fit(d: frozenset[int]) -> tuple[bool, int, int]:
            avail = free[d]
            whole = sum(len(c) for c in domain_cores[d] if c <= avail)
            return (whole < count, len(avail), min(d))
        best = min(fits, key=fit)
        if own and not best & own:
            return best, ('its new vCPUs did not fit the L3 domain of its '
                          'kept pCPUs')
        return best, None
    area: frozenset[int]
    area, got, used = frozenset(), 0, 0
    for d in sorted(domains, key=lambda d: (-len(free[d]), min(d))):
        if got >= count:
            break
        area |= d
        got += len(free[d])
        used += 1
    return area, ('no L3 domain had room for it at its placement (split '
                  'over %d)' % used)


def _take(count: int, cores: list[frozenset[int]], pool: frozenset[int],
          taken: set[int], own: set[int],
          core_of: dict[int, frozenset[int]]) -> list[int]:
    """Pick ``count`` free pCPUs, in core order, whole cores first.

    A core is whole only if every online sibling is in the pool and free:
    a sibling left to the host (reserved) or to another guest is a noisy
    neighbour, so such a core only serves remainders.
    """
    picked: list[int] = []

    def free(core: frozenset[int]) -> list[int]:
        return sorted((core & pool) - taken - set(picked))

    # 1. Free siblings of the pCPUs the guest already holds.
    own_cores = {core_of[c] for c in own}
    for core in cores:
        if core in own_cores:
            picked.extend(free(core)[:count - len(picked)])
    # 2. Whole free cores, while a whole core is still wanted.
    for core in cores:
        rest = count - len(picked)
        if rest <= 0:
            break
        avail = free(core)
        if len(avail) == len(core) and len(core) <= rest:
            picked.extend(avail)
    # 3. The remainder: best fit, partly used cores before whole ones.
    while len(picked) < count:
        rest = count - len(picked)
        candidates = [(core, free(core)) for core in cores]
        candidates = [(c, a) for c, a in candidates if a]
        fitting = [(c, a) for c, a in candidates if len(a) >= rest]
        if fitting:
            core, avail = min(fitting, key=lambda ca: (
                len(ca[1]) == len(ca[0]), len(ca[1]), min(ca[0])))
        else:
            core, avail = max(candidates, key=lambda ca: (
                len(ca[1]), -min(ca[0])))
        picked.extend(avail[:rest])
    return picked
