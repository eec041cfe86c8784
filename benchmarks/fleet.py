#!/usr/bin/env python3
"""Fleet: which host nova's scheduler picks, and what the package then
gives the guest there. The one-to-one share of a simulated cloud with
nova's default weighers, with packing, and with the one-to-one weigher,
one request at a time or in bursts weighed in parallel.

Usage: python benchmarks/fleet.py [--quick] [--seeds 3] [--loads ...]
       [--fleets uniform,mixed] [--bursts 1,4,8] [--workers 0]
       [--delay 2] [--subset 1] [--audit 0.0167] [--audit-only]
       [--multiplier M] [--spread-below 0] [--sweep] [--cost] [--jobs 1]
       [--json FILE]

The model (doc/source/reference/performance.rst, "Across the cloud", says what it
leaves out):

* hosts: *uniform*, 40 hosts of 2 NUMA nodes x 16 cores x 2 threads,
  256 GiB a node, one core reserved (``reserved_cpus``: pool 62 pCPUs,
  30 on node 0 and 32 on node 1); *mixed*, 20 of those and 20 of 1 node
  x 24 cores x 2 threads, 384 GiB, one core reserved (pool 46). Each
  host's nova inventory is its pool (``cpu_shared_set``),
  ``cpu_allocation_ratio`` 4.0, RAM ratio 1.0, 512 MiB reserved, local
  disk for its VCPU inventory at 10 GiB a vCPU and a fifth more;
* guests: flavors of 1, 2, 4, 8 and 16 vCPUs (30/30/25/10/5 %), 2 GiB
  and 10 GiB of disk a vCPU; Poisson arrivals, exponential lifetimes
  (mean 1, taken as an hour), as many as make the fleet's mean load
  (guest vCPUs / pool pCPUs) the given one; the same arrivals, flavors
  and lifetimes for every way of choosing;
* parallel scheduling (``Scenario``): after the steady state the fleet
  starts in (placed one by one), the arrivals come in bursts of
  ``--bursts`` B, weighed by ``--workers`` scheduler workers (0: one a
  request, none sees another's choice; a worker weighing several sees
  its own, nova's ``HostState.consume_from_request``, until the node is
  saved again); a claim reaches nova's database ``--delay`` seconds
  after its choice; placement's allocations count at once; nova picks
  among the ``--subset`` best (``host_subset_size``); ties fall in
  placement's order, the same for a whole burst and drawn alike for
  every way (common random numbers: a weigher that chooses as nova does
  gives nova's result exactly); ``--spread-below`` is the weigher's
  ``weigher_spread_below``;
* each host is planned by the package's engine (``policy.make_plan``)
  after every claim and departure, with the pins of the last plan
  carried into the next (as a live host reads them back). A new guest
  has no memory facts at its first pass (its home is chosen); its
  memory then lands where its vCPUs run: on its home node when it is
  one-to-one or on a node range, spread over the nodes when it floats
  over the host (host range) or the cross-node range, which makes it a
  cross-node guest from its next pass on (then planned at once);
* nova's scheduler: the hosts placement would offer (VCPU room), nova's
  whole default weigher set at its default multipliers (``nova_weights``:
  RAM, CPU and disk 1.0, I/O operations -1.0; the others weigh every
  host here alike, ``NOVA_WEIGHERS`` says why), each weigher's raw
  weights normalised (``nova.weights.normalize``; the one-to-one
  weigher with its fixed bounds -1 and 1), times its multiplier,
  summed; *default*: nova's; *packing*: RAM, CPU and disk at -1.0;
  *weigher*: default + ``OneToOneWeigher`` (``weigher.weigh_hosts``)
  with ``--multiplier`` (default: the package's default);
* what the weigher sees: each host's summary as nova-compute last
  saved it (``View``): at every claim (the last pass's, before the new
  guest's pass), every deletion (less the guest gone) and every
  periodic audit (every ``--audit`` mean lifetimes, each host at its own
  phase: 1/60 is nova's 60 s audit; 0: after every pass), as
  ``nova.nodesummary`` reports it from nova's
  ``ResourceTracker._update``; ``--audit-only``: at the audit alone, as
  a report from the driver's ``get_available_resource`` would be. With
  it the vCPUs nova placed since (``vcpus_used`` minus the summary's
  ``seen``);
* measured: the share of running guest vCPUs the engine binds
  one-to-one and the share of hosts without a guest, time-averaged over
  ``--measure`` mean lifetimes after ``--warmup`` of them; requests no
  host had room for are counted; the ceiling (``ceiling``: the most
  any placement could bind, the same guests) averaged alike.

``--cost`` times the weigher on 1,000 hosts (CPU time, median of 20
rounds, so that other work on the machine counts little): the pure path
(``weigher.weigh_hosts``: the cached decode, ``forecast`` and
``hostchoice``) always; with nova importable (run with
``.tox/nova-34/bin/python``), also ``OneToOneWeigher`` and nova's
``RAMWeigher`` and ``CPUWeigher`` through nova's own weight handler on
1,000 ``HostState`` objects.
"""

import argparse
import collections
import heapq
import itertools
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import time
import typing

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from nova_pinning_hooks import conf as conf_mod  # noqa: E402
from nova_pinning_hooks.engine import guest as guest_mod  # noqa: E402
from nova_pinning_hooks.engine import hostchoice  # noqa: E402
from nova_pinning_hooks.engine import plan as plan_mod  # noqa: E402
from nova_pinning_hooks.engine import policy  # noqa: E402
from nova_pinning_hooks.engine import summary as summary_mod  # noqa: E402
from nova_pinning_hooks.engine import topology  # noqa: E402
from nova_pinning_hooks.nova import weigher as weigher_mod  # noqa: E402
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
SWEEP = (10.0, 20.0, 30.0, 50.0)  # --sweep's multipliers


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


# Time is counted in guests' mean lifetimes, taken as an hour: nova's
# periodic audit (60 s) is 1/60 of it.
SECOND = 1 / 3600
# From the scheduler's choice to the compute's claim saved in nova's
# database (the build's RPC through the conductor, ``instance_claim``,
# ``ResourceTracker._update``), and how long a build counts in the
# host's ``io_workload`` (until the next audit after it ends).
CLAIM_DELAY = 2 * SECOND
BUILD_TIME = 20 * SECOND
DISK_GIB_PER_VCPU = 10


class Scenario(typing.NamedTuple):
    """How the scheduler runs: ``burst`` requests arrive at once and are
    weighed on one view of the hosts by ``workers`` scheduler workers
    (0: one each, none sees another's choice; a worker weighing several
    sees its own, as nova's ``HostState.consume_from_request`` makes it
    see them), each claim reaches nova's database ``delay`` after its
    choice, and nova picks at random among the ``subset`` best hosts
    (``[filter_scheduler] host_subset_size``); the weigher leaves
    nova's spread below ``spread_below`` of the pools
    (``weigher_spread_below``)."""

    burst: int = 1
    workers: int = 0
    delay: float = CLAIM_DELAY
    subset: int = 1
    spread_below: float = hostchoice.SPREAD_BELOW


class View(typing.NamedTuple):
    """A compute node as nova's database holds it (what the scheduler's
    ``HostState`` is refreshed from), saved at each ``_update``."""

    version: int
    text: typing.Optional[str]
    vcpus_used: int
    ram_used: int
    disk_used: int
    io: int  # stats' io_workload: instances building


class Host:
    """One compute host: its guests, the engine's plan, what placement
    holds (every allocation at once) and nova's database view."""

    def __init__(self, index, shape):
        self.index = index
        self.topo, reserved = topo(*SHAPES[shape])
        self.options = policy.Options(allocation_ratio=RATIO,
                                      reserved_cpus=reserved)
        self.pool = len(policy.guest_pool(self.topo, (), self.options))
        self.memory_mb = sum(n.memory_kib for n in
                             self.topo.nodes.values()) // 1024
        # Local disk: the VCPU inventory's room at 10 GiB a vCPU, and a
        # fifth more (disk never binds before vCPUs).
        self.disk_gb = int(self.pool * RATIO * DISK_GIB_PER_VCPU * 1.2)
        self.pool_nodes = [n for n, node in self.topo.nodes.items()
                           if node.cpus - reserved]
        self.guests = {}
        self.vcpus_used = 0  # on the compute (its resource tracker)
        self.alloc = 0       # placement's allocations (at the choice)
        self.one_to_one = 0
        self.plan = policy.make_plan(self.topo, [], self.options)
        self.builds = []     # claim times of the builds in io_workload
        self.db = View(0, None, 0, 0, 0, 0)

    def room(self, vcpus):
        """Placement's view: VCPU inventory left (memory and disk follow
        the vCPUs and never bind before them here)."""
        return self.pool * RATIO - self.alloc >= vcpus

    def arrive(self, uuid, vcpus, now):
        mb = vcpus * MIB_PER_VCPU
        self.guests[uuid] = guest_mod.Guest(
            uuid, uuid, True, tuple(range(vcpus)), {}, None, None, {},
            None, None, mb * 1024, True, False, {})
        self.vcpus_used += vcpus
        self.builds.append(now)
        self.replan()

    def leave(self, uuid):
        g = self.guests.pop(uuid)
        self.vcpus_used -= g.vcpu_count
        self.alloc -= g.vcpu_count
        self.replan()

    def replan(self):
        """A pass (``tests/passmodel.py``): plan, write the pins; a new
        guest's memory lands where its vCPUs run."""
        p = self.plan = passmodel.replan(self.topo, self.guests,
                                         self.options, self.pool_nodes)
        self.one_to_one = sum(len(gp.vcpu_pins) for gp in p.guests
                              if gp.mode == plan_mod.DEDICATED)

    def save(self, now, audit=False, summary=True):
        """``ResourceTracker._update``: the node saved with the summary
        of the last pass (``nova.nodesummary``), or without a new one
        (``summary`` False: the summary reaches nova at audits alone).
        An audit counts again the builds still running."""
        text = self.db.text
        if summary:
            s = summary_mod.of_plan(self.topo, list(self.guests.values()),
                                    self.plan, self.options, now)
            text = summary_mod.encode(s)
        if audit:
            self.builds = [b for b in self.builds if b + BUILD_TIME > now]
        self.db = View(self.db.version + 1, text, self.vcpus_used,
                       self.vcpus_used * MIB_PER_VCPU,
                       self.vcpus_used * DISK_GIB_PER_VCPU,
                       len(self.builds))


def normalize(values, minval=None, maxval=None):
    """``nova.weights.normalize``."""
    if not values:
        return []
    hi = max(values) if maxval is None else maxval
    lo = min(values) if minval is None else minval
    if hi == lo:
        return [0.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


class Local:
    """One scheduler worker's ``HostState`` objects: what it consumed
    itself (``consume_from_request``) since the database's view it read,
    dropped once the node is saved again (``HostState.update`` takes a
    newer ``updated_at``)."""

    def __init__(self):
        self.added = {}  # host index -> [db version, vCPUs]

    def view(self, host):
        v = host.db
        got = self.added.get(host.index)
        if got is None or got[0] != v.version:
            return v
        return v._replace(vcpus_used=v.vcpus_used + got[1],
                          ram_used=v.ram_used + got[1] * MIB_PER_VCPU,
                          disk_used=v.disk_used +
                          got[1] * DISK_GIB_PER_VCPU,
                          io=v.io + got[2])

    def consume(self, host, vcpus):
        got = self.added.get(host.index)
        if got is None or got[0] != host.db.version:
            got = self.added[host.index] = [host.db.version, 0, 0]
        got[1] += vcpus
        got[2] += 1


# nova's default weighers (``nova.scheduler.weights.all_weighers``) at
# their default multipliers, as nova 34.0.0 has them. Those that vary
# between hosts here: RAM, CPU and disk (1.0, spread by free room) and
# I/O operations (-1.0, away from hosts building the most). The others
# weigh every host here alike (nova's normalisation then gives 0):
# hypervisor version (1.0: one version), build failures (1,000,000: no
# failed builds), instances (0.0), cross-cell moves (1,000,000: no
# move), server group soft (anti-)affinity (1.0: no group), image
# properties (0.0), metrics (1.0: no metric configured), PCI (1.0: no
# device on any host).
NOVA_WEIGHERS = ('ram', 'cpu', 'disk', 'io_ops')


def nova_weights(hosts, views, sign):
    """The sum of nova's default weighers' normalised weights times
    their multipliers (``sign`` -1: RAM, CPU and disk set to pack)."""
    ram = normalize([h.memory_mb - RESERVED_MB - v.ram_used
                     for h, v in zip(hosts, views)], minval=0)
    cpu = normalize([h.pool * RATIO - v.vcpus_used
                     for h, v in zip(hosts, views)], minval=0)
    disk = normalize([h.disk_gb - v.disk_used
                      for h, v in zip(hosts, views)], minval=0)
    io = normalize([v.io for v in views], minval=0)
    return [sign * (a + b + c) - d for a, b, c, d in
            zip(ram, cpu, disk, io)]


class _State(typing.NamedTuple):
    """What ``OneToOneWeigher`` reads of a ``HostState``."""

    host: str
    stats: dict
    vcpus_used: int


def choose(cands, views, request, way, multiplier, subset, rnd,
           spread_below=hostchoice.SPREAD_BELOW):
    """nova's choice among ``cands`` (placement's order) for ``request``
    (``weigher.Request``): every weigher's weight, the sorted list,
    one of the ``subset`` best at random."""
    sign = -1.0 if way == 'packing' else 1.0
    total = nova_weights(cands, views, sign)
    if way == 'weigher':
        raw = weigher_mod.weigh_hosts(
            [_State(str(h.index), {summary_mod.KEY: v.text}
                    if v.text else {}, v.vcpus_used)
             for h, v in zip(cands, views)], request,
            spread_below=spread_below)
        total = [t + multiplier * w for t, w in
                 zip(total, normalize(raw, -1.0, 1.0))]
    ranked = sorted(range(len(cands)), key=lambda i: -total[i])
    return cands[rnd.choice(ranked[:subset])]


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


def bursts(arrivals, size):
    """The arrivals at time 0 one by one (the steady state the fleet
    starts in), then in bursts of ``size`` at the time of each burst's
    first: the same guests, the same mean load."""
    out = [[a] for a in arrivals if a[0] == 0.0]
    rest = arrivals[len(out):]
    for i in range(0, len(rest), size):
        chunk = rest[i:i + size]
        out.append([(chunk[0][0], s, life) for _, s, life in chunk])
    return out


def ceiling(vcpus, pool, ratio=RATIO):
    """The most guest vCPUs any placement could have one-to-one: an
    upper bound from the binding policy alone (doc/source/reference/
    performance.rst, "The ceiling"). A pCPU that binds no vCPU
    one-to-one carries at most ``ratio`` vCPUs of its node's guests
    (a node range) and ``ratio`` of the cross-node guests' (the rest of
    the pool), ``2 x ratio`` in all; a pCPU that binds one carries that
    one. So the vCPUs above the pool need at least ``(vcpus - pool) /
    (2 x ratio - 1)`` pCPUs given up by one-to-one binding. Whole
    guests, nodes and hosts, and nova's own cap of ``ratio`` a host,
    only lower the real figure."""
    over = max(0.0, vcpus - pool)
    return max(0.0, min(vcpus, pool - over / (2 * ratio - 1)))


def simulate(fleet, load, seed, way, multiplier, warmup, measure, audit,
             claims=True, scenario=None):
    scenario = scenario or Scenario()
    hosts = [Host(i, shape) for i, shape in enumerate(FLEETS[fleet])]
    # placement's orders and host_subset_size's picks: the same draws for
    # every way (common random numbers), so that a way that chooses as
    # nova's default does gives its result exactly
    rnd = random.Random('tie-%s-%s-%s' % (fleet, load, seed))
    phase = random.Random('audit-%s' % seed)
    next_audit = [phase.random() * audit for _ in hosts]
    for h in hosts:
        h.save(0, audit=True)
    queue = []  # heap of (time, order, kind, data)
    order = itertools.count()
    for b in bursts(events(fleet, load, seed, warmup + measure),
                    scenario.burst):
        heapq.heappush(queue, (b[0][0], next(order), 'burst', b))
    workers = [Local() for _ in range(
        scenario.workers or scenario.burst)]
    area = collections.Counter()
    last = warmup
    placed = rejected = 0
    now_totals = (0, 0, 0)
    n = 0
    pool = sum(h.pool for h in hosts)

    def advance(t):
        nonlocal last
        if t > warmup:
            dt = t - max(last, warmup)
            oto, vcpus, empty = now_totals
            area['oto'] += dt * oto
            area['all'] += dt * vcpus
            area['empty'] += dt * empty
            area['ceiling'] += dt * ceiling(vcpus, pool)
            last = t

    def tick(t):
        if audit <= 0:
            return
        for i, h in enumerate(hosts):
            if next_audit[i] <= t:
                h.save(t, audit=True)
                next_audit[i] += audit * math.ceil(
                    (t - next_audit[i]) / audit + 1e-12)

    def totals():
        return (sum(h.one_to_one for h in hosts),
                sum(h.vcpus_used for h in hosts),
                sum(1 for h in hosts if not h.guests))

    while queue:
        t, _, kind, data = heapq.heappop(queue)
        if t > warmup + measure:
            break
        advance(t)
        tick(t)
        if kind == 'leave':
            h, uuid = data
            h.leave(uuid)
            h.save(t, summary=claims or audit <= 0)
        elif kind == 'claim':
            h, uuid, size, life = data
            if claims or audit <= 0:
                h.save(t)  # the claim: the last pass's summary
            h.arrive(uuid, size, t)
            h.save(t, summary=audit <= 0)
            heapq.heappush(queue, (t + life, next(order), 'leave',
                                   (h, uuid)))
        else:
            initial = t == 0.0
            # placement's order: the same for every request of a burst
            # (ties fall alike for all of them)
            shuffled = hosts[:]
            rnd.shuffle(shuffled)
            for i, (_, size, life) in enumerate(data):
                local = workers[i % len(workers)]
                cands = [h for h in shuffled if h.room(size)]
                if not cands:
                    if t > warmup:
                        rejected += 1
                    continue
                uuid = 'g%06d' % n
                n += 1
                request = weigher_mod.Request(size, size * MIB_PER_VCPU
                                              * 1024, uuid)
                h = choose(cands, [local.view(c) for c in cands], request,
                           way, multiplier, scenario.subset, rnd,
                           scenario.spread_below)
                h.alloc += size
                local.consume(h, size)
                if t > warmup:
                    placed += 1
                delay = 0.0 if initial else scenario.delay
                heapq.heappush(queue, (t + delay, next(order), 'claim',
                                       (h, uuid, size, life)))
        now_totals = totals()
    advance(warmup + measure)
    share = area['oto'] / area['all'] if area['all'] else 0.0
    return {'fleet': fleet, 'load': load, 'seed': seed, 'way': way,
            'multiplier': multiplier, 'share': share,
            'ceiling': (area['ceiling'] / area['all'] if area['all']
                        else 0.0),
            'empty': area['empty'] / measure / len(hosts),
            'mean_load': area['all'] / measure / pool,
            'placed': placed, 'rejected': rejected,
            'scenario': scenario._asdict()}


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


def cell(values):
    if not values:
        return '-'
    return '%.1f (%.0f-%.0f)' % (statistics.mean(values), min(values),
                                 max(values))


def table(results, loads, fleets, rows, key='share'):
    """One line a row (label, way, multiplier, burst), one column a load:
    the mean of the seeds (lowest and highest), and a line of the gain
    over nova's default at the same burst after each weigher row."""
    lines = []
    what = {'share': 'one-to-one share of guest vCPUs',
            'empty': 'hosts without a guest'}[key]
    for fleet in fleets:
        lines.append('%s fleet: %s, %% (mean of seeds; min-max)'
                     % (fleet, what))
        lines.append('%-34s' % 'way' + ''.join('%16s' % ('load %g' % lo)
                                               for lo in loads))

        def got(way, mult, burst, lo, fleet=fleet, key=key):
            return [r[key] * 100 for r in results
                    if r['fleet'] == fleet and r['load'] == lo and
                    r['way'] == way and r['multiplier'] == mult and
                    r['scenario']['burst'] == burst]
        for label, way, mult, burst in rows:
            lines.append('%-34s' % label + ''.join(
                '%16s' % cell(got(way, mult, burst, lo)) for lo in loads))
            if way != 'weigher':
                continue
            gains = []
            for lo in loads:
                ours, base = got(way, mult, burst, lo), got(
                    'default', 0.0, burst, lo)
                gains.append('%16s' % ('%+.1f (min %+.1f)' % (
                    statistics.mean(ours) - statistics.mean(base),
                    min(x - y for x, y in zip(ours, base)))
                    if ours and len(ours) == len(base) else '-'))
            lines.append('%-34s' % '  gain, points (worst seed)' +
                         ''.join(gains))
        if key == 'share':
            # the bound for the same guests: every way runs the same
            # arrivals, so nova's default's runs carry it
            first = min(r[3] for r in rows)
            ceil, room = [], []
            for lo in loads:
                bound = got('default', 0.0, first, lo, key='ceiling')
                base = got('default', 0.0, first, lo)
                ceil.append('%16s' % cell(bound))
                room.append('%16s' % ('%+.1f' % (
                    statistics.mean(bound) - statistics.mean(base))
                    if base else '-'))
            lines.append('%-34s' % 'ceiling (no placement keeps more)' +
                         ''.join(ceil))
            lines.append('%-34s' % "  room over nova's default" +
                         ''.join(room))
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
            if h.room(size):
                h.alloc += size
                h.arrive('g%d' % j, size, 0)
        h.save(int(time.time()))
        texts.append((h.db.text, h.vcpus_used + rnd.choice((0, 0, 2))))
    out = {'hosts': count,
           'text_bytes_max': max(len(t) for t, _ in texts)}
    states = [_State('h%d' % i, {summary_mod.KEY: text}, used)
              for i, (text, used) in enumerate(texts)]

    def weigh(vcpus, mb):
        return weigher_mod.weigh_hosts(states, weigher_mod.Request(
            vcpus, mb * 1024, 'uuid-%d' % vcpus))
    weigh(1, 2048)  # decoded once
    times = []
    for r in range(rounds):
        vcpus = FLAVORS[r % len(FLAVORS)][0]
        start = time.process_time()
        weigh(vcpus, vcpus * MIB_PER_VCPU)
        times.append(time.process_time() - start)
    out['pure_ms_per_host_median'] = statistics.median(times) / count * 1e3
    weigher_mod.clear_cache()
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
    handler, on 1,000 ``HostState`` objects (their summaries fresh)."""
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
                               num_instances=1,
                               instance_uuid='8a3c2b1e-5d4f-4e6a-9b7c-'
                                             '0d1e2f3a4b5c')
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
    parser.add_argument('--bursts', default='1',
                        help='requests weighed at once (comma-separated: '
                             'one run each)')
    parser.add_argument('--workers', type=int, default=0,
                        help='scheduler workers sharing a burst (0: one a '
                             'request, none sees another\'s choice)')
    parser.add_argument('--delay', type=float, default=CLAIM_DELAY / SECOND,
                        help='seconds from a choice to its claim in '
                             'nova\'s database (a mean lifetime is an hour)')
    parser.add_argument('--subset', type=int, default=1,
                        help='[filter_scheduler] host_subset_size')
    parser.add_argument('--spread-below', type=float,
                        default=hostchoice.SPREAD_BELOW,
                        help='[nova_pinning] weigher_spread_below')
    parser.add_argument('--sweep', action='store_true',
                        help='also the weigher at multipliers %s (the '
                             'same fleets, loads and bursts)'
                             % ', '.join('%g' % m for m in SWEEP))
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
    burst_sizes = [int(b) for b in args.bursts.split(',')]
    scenarios = [Scenario(b, args.workers, args.delay * SECOND, args.subset,
                          args.spread_below) for b in burst_sizes]
    jobs, rows = [], []
    for sc in scenarios:
        tag = ', B %d' % sc.burst
        rows += [r for r in (
            ("nova's default" + tag, 'default', 0.0, sc.burst),
            ('packing (multipliers -1)' + tag, 'packing', 0.0, sc.burst),
            ('weigher x%g%s%s' % (multiplier, ', audit only'
                                  if args.audit_only else '', tag),
             'weigher', multiplier, sc.burst)) if r[1] in ways]
        for fleet in fleets:
            for load in loads:
                for seed in range(args.seeds):
                    for way in WAYS:
                        if way not in ways:
                            continue
                        mult = multiplier if way == 'weigher' else 0.0
                        jobs.append((fleet, load, seed, way, mult,
                                     args.warmup, args.measure, args.audit,
                                     claims, sc))
    if args.sweep:
        for mult in SWEEP:
            if mult == multiplier:
                continue
            for sc in scenarios:
                rows.append(('weigher x%g, B %d' % (mult, sc.burst),
                             'weigher', mult, sc.burst))
                for fleet in fleets:
                    for load in loads:
                        for seed in range(args.seeds):
                            jobs.append((fleet, load, seed, 'weigher', mult,
                                         args.warmup, args.measure,
                                         args.audit, claims, sc))
    start = time.monotonic()
    results = run_jobs(jobs, args.jobs)
    print('fleet.py: %d runs, %.0f s, %.0f s of CPU (warmup %g, measure '
          '%g mean lifetimes, audit every %g, %d seed(s); workers %s, '
          'claim delay %g s, host_subset_size %d, spread below %g)' % (
              len(jobs), time.monotonic() - start,
              sum(r['cpu_s'] for r in results), args.warmup,
              args.measure, args.audit, args.seeds,
              args.workers or 'one a request', args.delay, args.subset,
              args.spread_below))
    print()
    print(table(results, loads, fleets, rows))
    print(table(results, loads, fleets, rows, key='empty'))
    rej = [(r['fleet'], r['load'], r['way'], r['scenario']['burst'],
            r['rejected']) for r in results if r['rejected']]
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
