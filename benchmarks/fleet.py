#!/usr/bin/env python3
"""Fleet: which host nova's scheduler picks, and what the package then
gives the guest there. The one-to-one share of a simulated cloud with
nova's default weighers, with packing, and with the one-to-one weigher.

Usage: python benchmarks/fleet.py [--quick] [--seeds 3] [--loads ...]
       [--fleets uniform,mixed] [--audit 0.0167] [--audit-only]
       [--multiplier M] [--sweep] [--cost] [--jobs 1] [--json FILE]

The model (doc/source/reference/performance.rst, "Across the cloud", says what it
leaves out):

* hosts: *uniform*, 40 hosts of 2 NUMA nodes x 16 cores x 2 threads,
  256 GiB a node, one core reserved (``reserved_cpus``: pool 62 pCPUs,
  30 on node 0 and 32 on node 1); *mixed*, 20 of those and 20 of 1 node
  x 24 cores x 2 threads, 384 GiB, one core reserved (pool 46). Each
  host's nova inventory is its pool (``cpu_shared_set``),
  ``cpu_allocation_ratio`` 4.0, RAM ratio 1.0, 512 MiB reserved;
* guests: flavors of 1, 2, 4, 8 and 16 vCPUs (30/30/25/10/5 %), 2 GiB
  a vCPU; Poisson arrivals, exponential lifetimes (mean 1), as many as
  make the fleet's mean load (guest vCPUs / pool pCPUs) the given one;
  the same arrivals, flavors and lifetimes for every way of choosing;
* each host is planned by the package's engine (``policy.make_plan``)
  after every arrival and departure, with the pins of the last plan
  carried into the next (as a live host reads them back). A new guest
  has no memory facts at its first pass (its home is chosen); its
  memory then lands where its vCPUs run: on its home node when it is
  one-to-one or on a node range, spread over the nodes when it floats
  over the host (host range) or the cross-node range, which makes it a
  cross-node guest from its next pass on (then planned at once);
* nova's scheduler: the hosts placement would offer (VCPU and
  MEMORY_MB room), weighed as nova's weight handler does: each
  weigher's raw weights normalised (``nova.weights.normalize``: RAM and
  CPU weighers with ``minval`` 0, the one-to-one weigher with its fixed
  bounds -1 and 1), times its multiplier, summed; the best host wins, a
  tie broken at random (placement's order). *default*: ``RAMWeigher``
  + ``CPUWeigher``, multipliers 1.0; *packing*: multipliers -1.0;
  *weigher*: default + ``OneToOneWeigher`` (``summary.forecast`` and
  ``summary.score``) with ``--multiplier`` (default: the package's
  default);
* what the weigher sees: each host's summary as nova-compute last
  reported it: at every claim (the last pass's, before the new guest's
  pass), every deletion (less the guest gone) and every periodic audit
  (every ``--audit`` mean lifetimes, each host at its own phase: 1/60
  is nova's 60 s audit for guests living an hour; 0: after every pass),
  as ``nova.nodesummary`` reports it from nova's
  ``ResourceTracker._update``; ``--audit-only``: at the audit alone, as
  a report from the driver's ``get_available_resource`` would be. With
  it the vCPUs nova placed since (``vcpus_used`` minus the summary's
  ``seen``: nova's resource tracker counts each claim at once);
* measured: the share of running guest vCPUs the engine binds
  one-to-one, time-averaged over ``--measure`` mean lifetimes after
  ``--warmup`` of them; requests no host had room for are counted.

``--cost`` times the weigher on 1,000 hosts (CPU time, median of 20
rounds, so that other work on the machine counts little): the pure path
(``summary.decode``, cached per text as the weigher caches it, then
``forecast`` and ``score``) always; with nova importable (run with
``.tox/nova-34-env/bin/python``), also ``OneToOneWeigher`` and nova's
``RAMWeigher`` and ``CPUWeigher`` through nova's own weight handler on
1,000 ``HostState`` objects.
"""

import argparse
import heapq
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from nova_pinning_hooks import conf as conf_mod  # noqa: E402
from nova_pinning_hooks.engine import guest as guest_mod  # noqa: E402
from nova_pinning_hooks.engine import plan as plan_mod  # noqa: E402
from nova_pinning_hooks.engine import policy  # noqa: E402
from nova_pinning_hooks.engine import summary as summary_mod  # noqa: E402
from nova_pinning_hooks.engine import topology  # noqa: E402
from tests import passmodel  # noqa: E402
from tests.unit import hosts as host_xml  # noqa: E402

RATIO = 4.0
FLAVORS = ((1, 0.30), (2, 0.30), (4, 0.25), (8, 0.10), (16, 0.05))
MEAN_VCPUS = sum(v * p for v, p in FLAVORS)
MIB_PER_VCPU = 2048
RESERVED_MB = 512
GIB_KIB = 1024 * 1024
LOADS = (0.5, 0.8, 1.0, 1.3, 2.0)
WAYS = ('default', 'packing', 'weigher')


def topo(nodes, cores, threads, node_gib):
    """A host of ``nodes`` x ``cores`` x ``threads`` (siblings numbered
    ``c, c + all cores``), and its reserved core (node 0's first)."""
    total = nodes * cores
    layout = [[[c + t * total for t in range(threads)]
               for c in range(n * cores, (n + 1) * cores)]
              for n in range(nodes)]
    t = topology.HostTopology.from_capabilities(host_xml.capabilities(
        layout, memory_kib=node_gib * GIB_KIB))
    return t, frozenset(layout[0][0])


SHAPES = {'big': (2, 16, 2, 256), 'small': (1, 24, 2, 384)}
FLEETS = {'uniform': ('big',) * 40, 'mixed': ('big', 'small') * 20}


class Host:
    """One compute host: its guests, the engine's plan, nova's view."""

    def __init__(self, index, shape):
        self.index = index
        self.topo, reserved = topo(*SHAPES[shape])
        self.options = policy.Options(allocation_ratio=RATIO,
                                      reserved_cpus=reserved)
        self.pool = len(policy.guest_pool(self.topo, (), self.options))
        self.memory_mb = sum(n.memory_kib for n in
                             self.topo.nodes.values()) // 1024
        self.pool_nodes = [n for n, node in self.topo.nodes.items()
                           if node.cpus - reserved]
        self.guests = {}
        self.vcpus_used = 0  # nova's resource tracker: every claim
        self.ram_used = 0
        self.one_to_one = 0
        self.plan = policy.make_plan(self.topo, [], self.options)
        self.summary = None  # as the last audit reported it
        self.text = None

    def room(self, vcpus, mb):
        """Placement's view: VCPU and MEMORY_MB inventory left."""
        return (self.pool * RATIO - self.vcpus_used >= vcpus and
                self.memory_mb - RESERVED_MB - self.ram_used >= mb)

    def arrive(self, uuid, vcpus):
        mb = vcpus * MIB_PER_VCPU
        self.guests[uuid] = guest_mod.Guest(
            uuid, uuid, True, tuple(range(vcpus)), {}, None, None, {},
            None, None, mb * 1024, True, False, {})
        self.vcpus_used += vcpus
        self.ram_used += mb
        self.replan()

    def leave(self, uuid):
        g = self.guests.pop(uuid)
        self.vcpus_used -= g.vcpu_count
        self.ram_used -= g.memory_kib // 1024
        self.replan()

    def replan(self):
        """A pass (``tests/passmodel.py``): plan, write the pins; a new
        guest's memory lands where its vCPUs run."""
        p = self.plan = passmodel.replan(self.topo, self.guests,
                                         self.options, self.pool_nodes)
        self.one_to_one = sum(len(gp.vcpu_pins) for gp in p.guests
                              if gp.mode == plan_mod.DEDICATED)

    def audit(self, now):
        """nova's resource audit: the stats the weigher will read."""
        s = summary_mod.of_plan(self.topo, list(self.guests.values()),
                                self.plan, self.options, now)
        self.text = summary_mod.encode(s)
        self.summary = summary_mod.decode(self.text)


def normalize(values, minval=None, maxval=None):
    """``nova.weights.normalize``."""
    if not values:
        return []
    hi = max(values) if maxval is None else maxval
    lo = min(values) if minval is None else minval
    if hi == lo:
        return [0.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def weigher_raw(host, vcpus, mb):
    """``OneToOneWeigher``'s raw weight: ``summary.score`` of the
    forecast from the host's reported summary."""
    s = host.summary
    if s is None:
        return 0.0
    f = summary_mod.forecast(s, vcpus, mb * 1024,
                             host.vcpus_used - s.seen)
    return summary_mod.score(f)


def choose(hosts, vcpus, mb, way, multiplier, rnd):
    cands = [h for h in hosts if h.room(vcpus, mb)]
    if not cands:
        return None
    rnd.shuffle(cands)  # placement's order: ties fall where they fall
    sign = -1.0 if way == 'packing' else 1.0
    ram = normalize([max(0.0, h.memory_mb - RESERVED_MB - h.ram_used)
                     for h in cands], minval=0)
    cpu = normalize([max(0.0, h.pool * RATIO - h.vcpus_used)
                     for h in cands], minval=0)
    total = [sign * (a + b) for a, b in zip(ram, cpu)]
    if way == 'weigher':
        raw = [max(-1.0, min(1.0, weigher_raw(h, vcpus, mb)))
               for h in cands]
        total = [t + multiplier * w for t, w in
                 zip(total, normalize(raw, -1.0, 1.0))]
    best = max(range(len(cands)), key=total.__getitem__)
    return cands[best]


def events(fleet, load, seed, horizon):
    """The arrivals: (time, vCPUs, lifetime), the same for every way. The
    fleet starts in steady state: as many guests as the load makes on
    average (Poisson), arriving at time 0 with lifetimes that are, being
    exponential, what is left of theirs."""
    pool = sum(Host(i, s).pool for i, s in enumerate(FLEETS[fleet]))
    rate = load * pool / MEAN_VCPUS  # guests in steady state = rate x 1
    rnd = random.Random('%s-%s-%s' % (fleet, load, seed))
    sizes, weights = zip(*FLAVORS)
    # Poisson(rate) by its normal approximation (rate is in the
    # hundreds at least).
    start = max(0, round(rnd.gauss(rate, math.sqrt(rate))))
    out = [(0.0, rnd.choices(sizes, weights)[0], rnd.expovariate(1.0))
           for _ in range(start)]
    t = 0.0
    while True:
        t += rnd.expovariate(rate)
        if t >= horizon:
            return out
        out.append((t, rnd.choices(sizes, weights)[0],
                    rnd.expovariate(1.0)))


def simulate(fleet, load, seed, way, multiplier, warmup, measure, audit,
             claims=True):
    hosts = [Host(i, shape) for i, shape in enumerate(FLEETS[fleet])]
    rnd = random.Random('tie-%s-%s-%s-%s' % (fleet, load, seed, way))
    phase = random.Random('audit-%s' % seed)
    next_audit = [phase.random() * audit for _ in hosts]
    for h in hosts:
        h.audit(0)
    arrivals = events(fleet, load, seed, warmup + measure)
    departures = []  # heap of (time, uuid, host)
    area_oto = area_all = 0.0
    last = warmup
    placed = rejected = 0
    oto = vcpus = 0

    def advance(t):
        nonlocal area_oto, area_all, last
        if t > warmup:
            dt = t - max(last, warmup)
            area_oto += dt * oto
            area_all += dt * vcpus
            last = t

    def tick(t):
        if audit <= 0:
            return
        for i, h in enumerate(hosts):
            if next_audit[i] <= t:
                h.audit(t)
                next_audit[i] += audit * math.ceil(
                    (t - next_audit[i]) / audit + 1e-12)

    def totals():
        return (sum(h.one_to_one for h in hosts),
                sum(h.vcpus_used for h in hosts))

    for n, (t, size, life) in enumerate(arrivals):
        while departures and departures[0][0] <= t:
            td, uuid, h = heapq.heappop(departures)
            advance(td)
            tick(td)
            h.leave(uuid)
            if audit <= 0 or claims:
                h.audit(td)
            oto, vcpus = totals()
        advance(t)
        tick(t)
        mb = size * MIB_PER_VCPU
        h = choose(hosts, size, mb, way, multiplier, rnd)
        if h is None:
            if t > warmup:
                rejected += 1
            continue
        uuid = 'g%06d' % n
        if claims and audit > 0:
            h.audit(t)  # the claim: the last pass's summary
        h.arrive(uuid, size)
        if audit <= 0:
            h.audit(t)
        if t > warmup:
            placed += 1
        heapq.heappush(departures, (t + life, uuid, h))
        oto, vcpus = totals()
    advance(warmup + measure)
    share = area_oto / area_all if area_all else 0.0
    return {'fleet': fleet, 'load': load, 'seed': seed, 'way': way,
            'multiplier': multiplier, 'share': share,
            'mean_load': area_all / measure / sum(h.pool for h in hosts),
            'placed': placed, 'rejected': rejected}


def _run(job):
    start = time.process_time()
    result = simulate(*job)
    result['cpu_s'] = time.process_time() - start
    return result


def run_jobs(jobs, workers):
    if workers > 1:
        with multiprocessing.Pool(workers) as pool:
            return pool.map(_run, jobs)
    return [_run(j) for j in jobs]


def table(results, loads, fleets, rows):
    lines = []
    for fleet in fleets:
        lines.append('%s fleet: one-to-one share of guest vCPUs, %% (mean '
                     'of seeds; min-max)' % fleet)
        lines.append('%-28s' % 'way' + ''.join('%16s' % ('load %g' % lo)
                                               for lo in loads))
        for label, way, mult in rows:
            cells = []
            for lo in loads:
                got = [r['share'] * 100 for r in results
                       if r['fleet'] == fleet and r['load'] == lo and
                       r['way'] == way and r['multiplier'] == mult]
                if not got:
                    cells.append('%16s' % '-')
                    continue
                cells.append('%16s' % ('%.1f (%.0f-%.0f)' % (
                    statistics.mean(got), min(got), max(got))))
            lines.append('%-28s' % label + ''.join(cells))
        lines.append('')
    return '\n'.join(lines)


def cost(count=1000, rounds=20):
    """Seconds a host the weigher costs: the pure path, then nova's."""
    rnd = random.Random(7)
    texts = []
    for i in range(count):  # summaries of hosts at random fills
        h = Host(i, rnd.choice(('big', 'small')))
        for j in range(rnd.randint(0, 60)):
            size = rnd.choices(*zip(*FLAVORS))[0]
            if h.room(size, size * MIB_PER_VCPU):
                h.arrive('g%d' % j, size)
        h.audit(1732600000)
        texts.append((h.text, h.vcpus_used + rnd.choice((0, 0, 2))))
    out = {'hosts': count,
           'text_bytes_max': max(len(t) for t, _ in texts)}
    cache = {}

    def weigh(vcpus, mb):
        weights = []
        for text, used in texts:
            s = cache.get(text)
            if s is None:
                s = cache[text] = summary_mod.decode(text)
            weights.append(summary_mod.score(summary_mod.forecast(
                s, vcpus, mb * 1024, used - s.seen)))
        return weights
    times = []
    for r in range(rounds):
        vcpus = FLAVORS[r % len(FLAVORS)][0]
        start = time.process_time()
        weigh(vcpus, vcpus * MIB_PER_VCPU)
        times.append(time.process_time() - start)
    out['pure_ms_per_host_median'] = statistics.median(times) / count * 1e3
    cache.clear()
    start = time.process_time()
    weigh(2, 4096)
    out['pure_ms_per_host_first'] = (time.process_time() - start) \
        / count * 1e3
    try:
        out.update(nova_cost(texts, rounds))
    except ImportError as exc:
        out['nova'] = 'not importable here (%s)' % exc
    return out


def nova_cost(texts, rounds):
    """The weigher and nova's RAM and CPU weighers through nova's weight
    handler, on 1,000 ``HostState`` objects."""
    from nova import objects
    from nova.scheduler import host_manager
    from nova.scheduler import weights
    from nova.scheduler.weights import cpu
    from nova.scheduler.weights import ram
    import nova.conf
    from nova_pinning_hooks.nova import weigher as weigher_mod
    objects.register_all()
    conf = nova.conf.CONF
    conf([], default_config_files=[])
    conf_mod.register_opts(conf)
    states = []
    for i, (text, used) in enumerate(texts):
        hs = host_manager.HostState('h%d' % i, 'h%d' % i, 'cell')
        hs.stats = {summary_mod.KEY: text, 'num_instances': '3'}
        hs.vcpus_total, hs.vcpus_used = 62, used
        hs.cpu_allocation_ratio = RATIO
        hs.free_ram_mb = 500000 - used * MIB_PER_VCPU
        hs.aggregates = []
        states.append(hs)
    flavor = objects.Flavor(vcpus=2, memory_mb=4096, extra_specs={})
    spec = objects.RequestSpec(flavor=flavor, numa_topology=None,
                               num_instances=1)
    handler = weights.HostWeightHandler()
    out = {}
    for name, classes in (('one-to-one weigher', [weigher_mod.OneToOneWeigher]),
                          ("nova's RAM + CPU weighers",
                           [ram.RAMWeigher, cpu.CPUWeigher])):
        objs = [c() for c in classes]
        handler.get_weighed_objects(objs, states, spec)  # warm caches
        times = []
        for _ in range(rounds):
            start = time.process_time()
            handler.get_weighed_objects(objs, states, spec)
            times.append(time.process_time() - start)
        out['nova: %s ms per host' % name] = \
            statistics.median(times) / len(states) * 1e3
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='one seed, warmup and measure 1 mean lifetime '
                             'each')
    parser.add_argument('--seeds', type=int, default=3)
    parser.add_argument('--loads', default=','.join(map(str, LOADS)))
    parser.add_argument('--fleets', default='uniform,mixed')
    parser.add_argument('--warmup', type=float, default=2.0)
    parser.add_argument('--measure', type=float, default=2.0)
    parser.add_argument('--audit', type=float, default=1 / 60)
    parser.add_argument('--multiplier', type=float, default=None)
    parser.add_argument('--audit-only', action='store_true',
                        help='the summary reaches the scheduler at the '
                             'periodic audit only, not at each claim and '
                             'deletion too')
    parser.add_argument('--sweep', action='store_true',
                        help='also the weigher at multipliers 1, 2, 5, 10 '
                             'and 20 (uniform fleet, loads 0.8 to 1.3)')
    parser.add_argument('--ways', default=','.join(WAYS),
                        help='which of default, packing and weigher to run')
    parser.add_argument('--cost', action='store_true',
                        help='only time the weigher on 1,000 hosts')
    parser.add_argument('--jobs', type=int, default=1)
    parser.add_argument('--json', metavar='FILE')
    args = parser.parse_args()
    if args.cost:
        print(json.dumps(cost(), indent=1))
        return
    if args.quick:
        args.seeds, args.warmup, args.measure = 1, 1.0, 1.0
    multiplier = args.multiplier
    if multiplier is None:
        multiplier = conf_mod.DEFAULT_WEIGHER_MULTIPLIER
    loads = [float(x) for x in args.loads.split(',')]
    claims = not args.audit_only
    fleets = args.fleets.split(',')
    ways = args.ways.split(',')
    label = 'default + weigher x%g%s' % (
        multiplier, ', audit only' if args.audit_only else '')
    jobs, rows = [], [r for r in (
        ("nova's default (RAM + CPU)", 'default', 0.0),
        ('packing (multipliers -1)', 'packing', 0.0),
        (label, 'weigher', multiplier)) if r[1] in ways]
    for fleet in fleets:
        for load in loads:
            for seed in range(args.seeds):
                for way, mult in (('default', 0.0), ('packing', 0.0),
                                  ('weigher', multiplier)):
                    if way not in ways:
                        continue
                    jobs.append((fleet, load, seed, way, mult, args.warmup,
                                 args.measure, args.audit, claims))
    if args.sweep:
        for mult in (1.0, 2.0, 5.0, 10.0, 20.0):
            if mult == multiplier:
                continue
            rows.append(('default + weigher x%g' % mult, 'weigher', mult))
            for load in (0.8, 1.0, 1.3):
                for seed in range(args.seeds):
                    jobs.append(('uniform', load, seed, 'weigher', mult,
                                 args.warmup, args.measure, args.audit,
                                 claims))
    start = time.monotonic()
    results = run_jobs(jobs, args.jobs)
    print('fleet.py: %d runs, %.0f s (warmup %g, measure %g mean '
          'lifetimes, audit every %g, %d seed(s))' % (
              len(jobs), time.monotonic() - start, args.warmup,
              args.measure, args.audit, args.seeds))
    print()
    print(table(results, loads, fleets, rows))
    rej = [(r['fleet'], r['load'], r['way'], r['rejected'])
           for r in results if r['rejected']]
    print('requests with no room: %s' % (rej or 'none'))
    for fleet in fleets:
        for lo in loads:
            got = [r['mean_load'] for r in results
                   if r['fleet'] == fleet and r['load'] == lo]
            print('%s load %g: measured mean load %.2f to %.2f' % (
                fleet, lo, min(got), max(got)))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)


if __name__ == '__main__':
    main()
