#!/usr/bin/env python3
"""libvirt calls and pin churn over a day of operations (fake libvirt).

Usage: python benchmarks/churn.py [--seed 1] [--ops 200]

One scripted day on the intel-2s-28c-ht host (112 pCPUs, CPUs 0 and 56
reserved, ratio 4): 60 guests booted one by one, then a mix of
operations (boot, stop, start, resize, migrate away, delete), replayed
twice on the fake libvirt with the same guests and memory placement:

* this package: one reconciler pass after each operation (read, plan,
  diff, write only what differs);
* naive: after each operation every vCPU and emulator of every guest is
  pinned again from a fresh one-to-one plan, as the original design's
  first demo did (no diff, no stickiness).

After each operation it counts libvirt writes, and pins that moved on
guests the operation did not touch (and whether the node changed mode,
which legitimately re-pins a node).
"""

import argparse
import os
import random
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from oslo_config import cfg  # noqa: E402

from nova_pinning_hooks import conf as conf_mod  # noqa: E402
from nova_pinning_hooks.engine import plan as plan_mod  # noqa: E402
from nova_pinning_hooks.engine import policy  # noqa: E402
from nova_pinning_hooks.engine import snapshot as snapshot_mod  # noqa: E402
from nova_pinning_hooks.passes import reconciler  # noqa: E402
from nova_pinning_hooks.passes import settings as settings_mod
from tests.fixtures import FakeLibvirtFixture  # noqa: E402
from tests.unit import hosts  # noqa: E402

HOST = 'intel-2s-28c-ht'


def script(seed, ops):
    """The day: a list of (operation, guest name, vCPUs, node)."""
    rnd = random.Random(seed)
    steps, live, stopped, n = [], [], [], 0

    def new():
        nonlocal n
        n += 1
        return 'vm%03d' % n, rnd.choice([1, 2, 2, 4, 4, 8]), rnd.randint(0, 1)
    for _ in range(60):
        name, vcpus, node = new()
        steps.append(('boot', name, vcpus, node))
        live.append(name)
    weights = [('boot', 3), ('delete', 3), ('stop', 2), ('start', 2),
               ('resize', 2), ('migrate-away', 1)]
    kinds = [k for k, w in weights for _ in range(w)]
    for _ in range(ops):
        kind = rnd.choice(kinds)
        if kind == 'boot' or not live:
            name, vcpus, node = new()
            steps.append(('boot', name, vcpus, node))
            live.append(name)
        elif kind == 'start':
            if stopped:
                name = stopped.pop(rnd.randrange(len(stopped)))
                live.append(name)
                steps.append(('start', name, None, None))
        elif kind == 'resize':
            name = rnd.choice(live)
            steps.append(('resize', name, rnd.choice([1, 2, 4, 8]), None))
        else:
            name = live.pop(rnd.randrange(len(live)))
            if kind == 'stop':
                stopped.append(name)
            steps.append((kind, name, None, None))
    return steps


class Day:
    """Replays the script on a fake host with one strategy."""

    def __init__(self, strategy, tmp):
        self.strategy = strategy
        self.fix = FakeLibvirtFixture(hosts.load(HOST))
        self.fix.setUp()
        self.fake = self.fix.host
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        conf([], default_config_files=[])
        conf.set_override('allocation_ratio', 4.0, 'nova_pinning')
        conf.set_override('reserved_cpus', '0,56', 'nova_pinning')
        conf.set_override('lock_path', tmp, 'nova_pinning')
        self.conf = conf
        self.rec = reconciler.Reconciler(settings_mod.read(conf))
        self.specs = {}  # name -> (vcpus, node)
        self.results = []

    def apply(self, step):
        kind, name, vcpus, node = step
        if kind == 'boot':
            self.specs[name] = (vcpus, node)
            self._create(name)
        elif kind == 'start':
            self._create(name)
        elif kind == 'resize':
            self.fake.by_name(name).destroy()
            self.specs[name] = (vcpus, self.specs[name][1])
            self._create(name)
        else:
            self.fake.by_name(name).destroy()

    def _create(self, name):
        vcpus, node = self.specs[name]
        self.fake.add_domain(name, vcpus, xml=hosts.domain_xml(name, vcpus),
                             memory_by_node_kib={str(node): 1048576})

    def pins(self):
        return {d.name(): dict(d.vcpu_pins) for d in
                self.fake.domains.values()}

    def run_step(self, step):
        before_pins = self.pins()
        before_writes = self.fake.writes()
        self.apply(step)
        if self.strategy == 'package':
            result = self.rec.run_pass()
            assert result.error is None, result.error
            assert result.calls['write'] == len(result.changes)
            modes = {gp.name: gp.mode for gp in result.plan.guests}
        else:
            modes = self.naive()
        after = self.pins()
        moved = sum(1 for name, pins in before_pins.items()
                    if name != step[1] and name in after
                    for v, cpus in pins.items()
                    if after[name].get(v) != cpus)
        self.results.append({'op': step[0],
                             'writes': self.fake.writes() - before_writes,
                             'moved': moved, 'modes': modes})

    def naive(self):
        snap = snapshot_mod.load(self.rec.read(), from_libvirt=True)
        # Forget every current pin: a fresh plan each time.
        guests = [g._replace(vcpu_pins={}, emulator_pin=None)
                  for g in snap.guests]
        p = policy.make_plan(snap.host, guests, snap.options)
        changes = plan_mod.changes(p, guests)  # every pin, old = None
        self.rec._adapter().apply(changes)
        return {gp.name: gp.mode for gp in p.guests}

    def close(self):
        self.rec.close()
        self.fix.cleanUp()


def summarise(results, label):
    ops = sorted({r['op'] for r in results})
    rows = []
    for op in ops + ['all']:
        rs = [r for r in results if op in ('all', r['op'])]
        rows.append('| %s | %s | %d | %.1f | %d | %.2f |' % (
            label, op, len(rs), statistics.mean(r['writes'] for r in rs),
            sum(r['moved'] for r in rs),
            statistics.mean(r['moved'] for r in rs)))
    return rows


def mode_changes(results):
    """Operations after which some guest's mode differs from before."""
    count, prev = 0, {}
    for r in results:
        if any(prev.get(n) not in (None, m) for n, m in r['modes'].items()):
            count += 1
        prev = r['modes']
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--ops', type=int, default=200)
    args = ap.parse_args()
    steps = script(args.seed, args.ops)
    print('| strategy | operation | count | writes per op | pins moved on '
          'untouched guests | per op |')
    print('|---|---|---|---|---|---|')
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for strategy in ('package', 'naive'):
            day = Day(strategy, tmp)
            try:
                for step in steps:
                    day.run_step(step)
            finally:
                day.close()
            for row in summarise(day.results, strategy):
                print(row)
            summary.append((strategy, day.results))
    print()
    for strategy, results in summary:
        quiet = [r for i, r in enumerate(results)
                 if i and results[i - 1]['modes'] and
                 all(results[i - 1]['modes'].get(n) in (None, m)
                     for n, m in r['modes'].items())]
        print('%s: %d operations, %d with a mode change; pins moved on '
              'untouched guests in operations without a mode change: %d; '
              'total writes %d' % (
                  strategy, len(results), mode_changes(results),
                  sum(r['moved'] for r in quiet),
                  sum(r['writes'] for r in results)))


if __name__ == '__main__':
    main()
