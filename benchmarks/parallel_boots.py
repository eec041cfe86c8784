#!/usr/bin/env python3
"""Parallel boots on the real libvirtd, with the hook path on and off.

Usage (root, libvirtd running: tools/setup-host.sh):
    python benchmarks/parallel_boots.py [--guests 20] [--rounds 3]
        [--modes inactive,hooks,agent] [--coalesce-delay S]

Each round boots N tiny guests (64 MiB, 1 vCPU, no disk) at once, one
thread each, through a stand-in for ComputeManager whose
``_do_build_and_run_instance`` creates the domain as nova's does. Modes:

* ``hooks``: the method is hooked exactly as in nova-compute and the
  nova plugin's agent runs its passes in a thread (native-thread nova;
  incremental passes; no ``init_host`` here, so no libvirt events: the
  hooks alone drive the passes);
* ``agent``: no hook; the binding agent (``nova-pinning agent``'s
  ``service.BindingService``, libvirt events) runs in this process;
* ``inactive``: the same method, unhooked, nothing running.

Modes take turns within each round, in a rotating order, so all see the
same machine state. ``--coalesce-delay`` sets ``[nova_pinning]
coalesce_delay`` for the active modes (default: the option's default).

Reported per mode (median over rounds): wall time of the burst (first
create started to last create returned), and, when active: passes run
during and after the burst, the libvirt calls they made (reads and
writes, as ``virt.Host.calls`` counts them), and the longest time from a
guest's create returning to its vCPU pinned as planned (CPU 1: CPU 0 is reserved, so a
pinned vCPU differs from an unpinned one). When a guest was pinned is
taken from libvirt's tunable event for that pin, received by this
script's own connection while the burst runs (an earlier version polled
only after the burst, which made early guests look late).
"""

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

import libvirt  # noqa: E402
from oslo_config import cfg  # noqa: E402

from nova_pinning_hooks.runtime import service  # noqa: E402
from nova_pinning_hooks import conf as conf_mod  # noqa: E402
from nova_pinning_hooks.host import virt  # noqa: E402
from nova_pinning_hooks.nova import activation  # noqa: E402
from nova_pinning_hooks.nova import hookpoints  # noqa: E402
from nova_pinning_hooks.runtime import settings as runtime_settings
from tests.fixtures import register_nova_options  # noqa: E402

URI = 'qemu:///system'
PREFIX = 'nph-bench-'
XML = ("<domain type='{type}'><name>{name}</name><memory unit='MiB'>64"
       "</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm"
       "</type></os><devices><emulator>/usr/bin/qemu-system-x86_64"
       "</emulator></devices></domain>")


def virt_type():
    try:
        with open('/run/nova-pinning-hooks/virt-type') as f:
            return f.read().strip() or 'qemu'
    except OSError:
        return 'qemu'


class Manager:
    """Stands in for ComputeManager: the build creates the domain."""

    conn = None
    created = {}

    def _do_build_and_run_instance(self, context, instance):
        dom = self.conn.createXML(XML.format(type=virt_type(),
                                             name=instance), 0)
        self.created[instance] = time.monotonic()
        return dom


COALESCE_DELAY = None  # --coalesce-delay; None: the option's default


def conf_for(tmp):
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    register_nova_options(conf, initial_cpu_allocation_ratio=32.0)
    conf([], default_config_files=[])
    if COALESCE_DELAY is not None:
        conf.set_override('coalesce_delay', COALESCE_DELAY, 'nova_pinning')
    for key, value in (('reserved_cpus', '0'), ('lock_path', tmp),
                       ('overcommit_file', tmp + '/oc.json'),
                       ('periodic_interval', 0)):
        conf.set_override(key, value, 'nova_pinning')
    return conf


def cleanup(conn, prefix=PREFIX):
    """Destroy the benchmark's guests (named ``prefix``...)."""
    for dom in conn.listAllDomains():
        if dom.name().startswith(prefix):
            try:
                dom.destroy()
            except libvirt.libvirtError:
                pass


def pinned(dom):
    info = dom.vcpuPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE)
    return info[0][1] and not info[0][0]  # on CPU 1 only


PINNED = {}  # guest name -> when libvirt said its vCPU 0 went to CPU 1


def on_tunable(conn, dom, params, opaque):
    if params.get('cputune.vcpupin0') == '1':
        PINNED.setdefault(dom.name(), time.monotonic())


def burst(conn, n, mode, tmp, rnd):
    cls = type('Manager', (Manager,), {})
    cls.conn, cls.created = conn, {}
    a = None
    active = mode != 'inactive'
    if mode == 'hooks':
        a = activation.activate(conf_for(tmp), manager_cls=cls)
    elif mode == 'agent':
        conf = conf_for(tmp)
        # Without nova, the ratio comes from the agent's configuration.
        conf.set_override('allocation_ratio', 32.0, 'nova_pinning')
        a = service.BindingService(runtime_settings.read(conf))
        stop = threading.Event()
        runner = threading.Thread(target=a.run, args=(stop,), daemon=True)
        runner.start()
    if active:
        a.coalescer.request('settle', wait=True, timeout=60)
        passes_before = a.coalescer.passes
        calls_before = dict(a.reconciler.host().calls)
    names = ['%s%s-%d' % (PREFIX, rnd, i) for i in range(n)]
    threads = [threading.Thread(
        target=cls()._do_build_and_run_instance, args=(None, name))
        for name in names]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    result = {'wall': wall}
    if active:
        # Checked once the burst is over; when each got its pin is
        # known from libvirt's tunable events (``PINNED``), received
        # while the burst ran.
        end = time.monotonic() + 30
        done = set()
        while len(done) < n and time.monotonic() < end:
            done |= {x for x in names if x not in done and
                     pinned(conn.lookupByName(x))}
            time.sleep(0.02)
        result['all_pinned'] = len(done) == n
        pinned_at = {x: PINNED[x] for x in names if x in PINNED}
        result['all_pinned'] &= len(pinned_at) == n
        result['latency'] = max(pinned_at[x] - cls.created[x]
                                for x in pinned_at) if pinned_at else None
        burst_end = max(cls.created.values())
        result['after_burst'] = max(pinned_at.values()) - burst_end \
            if pinned_at else None
        a.coalescer.request('final', wait=True, timeout=60)
        result['passes'] = a.coalescer.passes - passes_before
        calls = a.reconciler.host().calls
        for kind in ('read', 'write'):
            result[kind] = calls[kind] - calls_before.get(kind, 0)
        if mode == 'hooks':
            activation.deactivate()
            hookpoints.uninstall(cls, 'bind_numa_affinity')
        else:
            stop.set()
            runner.join(30)
    cleanup(conn)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--guests', type=int, default=20)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--modes', default='inactive,hooks,agent')
    ap.add_argument('--coalesce-delay', type=float, default=None)
    args = ap.parse_args()
    global COALESCE_DELAY
    COALESCE_DELAY = args.coalesce_delay
    modes = args.modes.split(',')
    # Our own connection gets the tunable events: the time each guest
    # was pinned is known without polling libvirtd during the burst.
    virt.start_event_loop()
    conn = libvirt.open(URI)
    conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_TUNABLE,
                                on_tunable, None)
    cleanup(conn)
    runs = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for rnd in range(args.rounds):
                order = modes[rnd % len(modes):] + modes[:rnd % len(modes)]
                for mode in order:
                    runs[mode].append(burst(conn, args.guests, mode, tmp,
                                            '%d%s' % (rnd, mode[0])))
        finally:
            cleanup(conn)
    print('| mode | guests | rounds | burst wall time (s, median) | '
          'passes (median) | libvirt reads, writes (median) | '
          'longest create->pinned (s) | '
          'pinned after burst end (s) | every guest pinned |')
    print('|---|---|---|---|---|---|---|---|---|')
    for mode in modes:
        rs = runs[mode]
        wall = statistics.median(r['wall'] for r in rs)
        if mode == 'inactive':
            print('| %s | %d | %d | %.2f | - | - | - | - | - |'
                  % (mode, args.guests, args.rounds, wall))
            continue
        print('| %s | %d | %d | %.2f | %s | %s, %s | %.2f | %.2f | %s |' % (
            mode, args.guests, args.rounds, wall,
            statistics.median(r['passes'] for r in rs),
            statistics.median(r['read'] for r in rs),
            statistics.median(r['write'] for r in rs),
            max(r['latency'] for r in rs),
            max(r['after_burst'] for r in rs),
            all(r['all_pinned'] for r in rs)))
    print()
    for mode in modes:
        print('%s: wall per round %s; longest create->pinned per round %s'
              % (mode, ['%.2f' % r['wall'] for r in runs[mode]],
                 ['%.2f' % r['latency'] for r in runs[mode]
                  if r.get('latency') is not None]))


if __name__ == '__main__':
    main()
