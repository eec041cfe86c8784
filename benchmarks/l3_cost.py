#!/usr/bin/env python3
"""L3 cost: what cache alignment adds to planning, on the Genoa fixture.

Usage: python benchmarks/l3_cost.py [--runs 30] [--counts 100,1000]

The 2-socket AMD Genoa NPS1 fixture (384 pCPUs, 24 L3 domains) with its
cache banks and without them (one domain per node), carrying the guests
of ``plan_cost.py`` (small domain XML, parsed once beforehand). For each,
the CPU time of ``policy.make_plan`` (the one-to-one assignment is where
alignment works) and of the JSON form of the plan (``plan.to_json``,
which gives each guest its ``l3_domains`` when the host has banks). The
fastest of --runs, the hosts taking turns: on a machine others share,
the least disturbed run.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

import plan_cost  # noqa: E402
from nova_pinning_hooks.engine import plan as plan_mod  # noqa: E402
from nova_pinning_hooks.engine import policy  # noqa: E402
from nova_pinning_hooks.engine import snapshot  # noqa: E402
from tests.unit import hosts  # noqa: E402


def fastest_ms(best, key, func, *args, **kwargs):
    """Keep in ``best[key]`` the fastest CPU time of ``func(*args)``."""
    start = time.process_time()
    result = func(*args, **kwargs)
    best[key] = min(best.get(key, float('inf')),
                    (time.process_time() - start) * 1000)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--runs', type=int, default=30)
    ap.add_argument('--counts', default='100,1000')
    args = ap.parse_args()
    genoa = hosts.load('genoa-2s-nps1')
    cases = {}
    for label, caps in (('24 L3 domains', genoa),
                        ('without banks', hosts.strip_banks(genoa))):
        for count in (int(c) for c in args.counts.split(',')):
            snap = snapshot.load(plan_cost.make_snapshot(
                caps, count, template=plan_cost.SMALL_DOMAIN))
            cases[label, count] = snap
    best = {}
    for _ in range(args.runs):
        for key, snap in cases.items():
            p = fastest_ms(best, key + ('plan',), policy.make_plan,
                           snap.host, snap.guests, snap.options)
            fastest_ms(best, key + ('json',), plan_mod.to_json, p, [],
                       host=snap.host)
    print('| host | guests | modes | make_plan (ms) | to_json (ms) |')
    print('|---|---|---|---|---|')
    for (label, count), snap in cases.items():
        p = policy.make_plan(snap.host, snap.guests, snap.options)
        modes = '/'.join(sorted({gp.mode for gp in p.guests}))
        print('| %s | %d | %s | %.2f | %.2f |' % (
            label, count, modes, best[label, count, 'plan'],
            best[label, count, 'json']))


if __name__ == '__main__':
    main()
