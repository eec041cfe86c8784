#!/usr/bin/env python3
"""Pass cost: a full pass against an incremental one, on the fake libvirt.

Usage: python benchmarks/pass_cost.py [--guests 100,1000,5000]
       [--latency-ms 0.5] [--runs 7]

A host like the 256-pCPU AMD fixture carries N nova-sized guests (the
domain XML of ``plan_cost.py``) in the fake libvirt, each call to the
daemon taking ``--latency-ms`` (sleeping, as an RPC waits: no CPU). After
two settling passes, it measures, median of --runs:

* *full*: what every pass did before: list, fetch and parse every
  domain's XML, plan, diff (``Reconciler`` without a model);
* *unchanged*: an incremental pass (``Reconciler`` with a
  ``model.HostModel``, as the agent and nova-compute keep one) over the
  same host;
* *one new guest*: an incremental pass after one guest was created;
* *one pin changed*: an incremental pass after a vCPU pin was changed
  behind its back and libvirt's event about it arrived.

Reported: libvirt calls (reads, writes), how many guests the pass
compared with their live pins, wall time, and CPU time of the whole
process (the engine and the fake daemon's Python alike, so an upper
bound for the engine), also less the unchanged pass's (the listing of
every domain, which any pass makes), taken in turns with it.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from oslo_config import cfg  # noqa: E402

import plan_cost  # noqa: E402
from nova_pinning_hooks import conf as conf_mod  # noqa: E402
from nova_pinning_hooks.host import libvirtapi  # noqa: E402
from nova_pinning_hooks.host import model as model_mod  # noqa: E402
from nova_pinning_hooks.host import virtread  # noqa: E402
from nova_pinning_hooks.passes import reconciler  # noqa: E402
from nova_pinning_hooks.passes import settings as settings_mod
from tests import fakelibvirt  # noqa: E402
from tests.unit import hosts  # noqa: E402

URI = 'qemu:///bench'


def make_host(count, latency, host='amd-2s-64c-nps4'):
    fake = fakelibvirt.FakeHost(hosts.load(host))
    snap = plan_cost.make_snapshot(fake.capabilities, count)
    for i, dom in enumerate(snap['domains']):
        fake.add_domain('g%d' % i, 1, xml=dom['xml'],
                        memory_by_node_kib=dom['memory_by_node_kib'])
    for dom in fake.domains.values():  # the XML's own vCPU count
        dom.vcpus = int(dom.base_xml.split("placement='static'>")[1]
                        .split('<')[0])
    fake.latency = latency
    return fake


def conf_for(tmp):
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    conf([], default_config_files=[])
    for key, value in (('connection_uri', URI), ('allocation_ratio', 4.0),
                       ('reserved_cpus', '0-1'), ('lock_path', tmp),
                       ('resync_interval', 0), ('kernel_affinity', False)):
        conf.set_override(key, value, 'nova_pinning')
    return conf


def measure(rec, prepare, runs):
    """(result, wall ms, CPU ms, CPU ms of an unchanged pass just before
    each run): medians. The unchanged pass taken in turns with the
    measured one sees the same state of the machine."""
    walls, cpus, before, result = [], [], [], None
    for _ in range(runs):
        cpu0 = time.process_time()
        rec.run_pass()
        before.append((time.process_time() - cpu0) * 1000)
        prepare()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = rec.run_pass()
        walls.append((time.perf_counter() - wall0) * 1000)
        cpus.append((time.process_time() - cpu0) * 1000)
        if result.error:
            raise SystemExit('pass failed: %s' % result.error)
        rec.run_pass()  # reads back what it wrote, as it happens live
    return result, statistics.median(walls), statistics.median(cpus), \
        statistics.median(before)


def settle():
    """Nothing changes before the pass."""


def memory_of(reader, name):
    """Stands in for the memory cgroup read: one file, whatever the
    number of guests (the fake's ``by_name`` walks them all)."""
    fake = reader._bench_fake
    dom = fake.bench_names.get(name)
    if dom is None:
        fake.bench_names = {d.name(): d for d in fake.domains.values()}
        dom = fake.bench_names[name]
    return dict(dom.memory_by_node_kib)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--guests', default='100,1000,5000')
    ap.add_argument('--latency-ms', type=float, default=0.5)
    ap.add_argument('--runs', type=int, default=7)
    ap.add_argument('--host', default='amd-2s-64c-nps4',
                    help='a host of tests/unit/hosts.py (genoa-2s-nps1: '
                         'with L3 banks)')
    args = ap.parse_args()
    libvirtapi.libvirt = fakelibvirt
    virtread.Reader._memory_from_proc = memory_of
    print('| guests | pass | libvirt reads | libvirt writes | guests '
          'compared | wall (ms) | CPU (ms) | CPU above unchanged (ms) |')
    print('|---|---|---|---|---|---|---|---|')
    with tempfile.TemporaryDirectory() as tmp:
        for count in (int(c) for c in args.guests.split(',')):
            fake = make_host(count, args.latency_ms / 1000.0, args.host)
            fake.bench_names = {}
            fakelibvirt.register(URI, fake)
            virtread.Reader._bench_fake = fake
            conf = conf_for(tmp)
            full = reconciler.Reconciler(settings_mod.read(conf))
            model = model_mod.HostModel()
            inc = reconciler.Reconciler(settings_mod.read(conf), model=model)
            for rec in (full, inc, full, inc):
                rec.run_pass()  # settle: every guest bound
            rows = [('full', full, settle), ('unchanged', inc, settle)]
            added = []

            def one_new(fake=fake, added=added, model=model):
                added.append(fake.add_domain(
                    'new%d' % len(added), 2,
                    xml=hosts.domain_xml('new%d' % len(added), 2),
                    memory_by_node_kib={'0': 65536}))
                model.mark(added[-1].UUIDString())  # its start event

            victim = list(fake.domains.values())[0]

            def one_pin(fake=fake, victim=victim, model=model):
                victim.vcpu_pins[0] = tuple(range(2, 200))
                model.mark(victim.UUIDString())  # its tunable event

            rows += [('one new guest', inc, one_new),
                     ('one pin changed', inc, one_pin)]
            for label, rec, prepare in rows:
                result, wall, cpu, unchanged = measure(rec, prepare,
                                                       args.runs)
                print('| %d | %s | %d | %d | %d | %.1f | %.1f | %s |' % (
                    count, label, result.calls['read'],
                    result.calls['write'], result.compared, wall, cpu,
                    '-' if label in ('full', 'unchanged') else
                    '%.1f' % (cpu - unchanged)))
            for rec in (full, inc):
                rec.close()
            fakelibvirt.unregister(URI)


if __name__ == '__main__':
    main()
