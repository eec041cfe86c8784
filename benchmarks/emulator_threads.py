#!/usr/bin/env python3
"""A one-to-one guest's steal with its emulator thread busy: guest vs shared.

Usage (root, libvirtd running: tools/setup-host.sh; needs gcc -m32):
    flock /run/nph-functional.lock python benchmarks/emulator_threads.py \
        [--rounds 12] [--window 5] [--rate 20] [--json FILE]

One KVM guest, ``nph-bench-emu-1``: 1 vCPU running ``steal/guest.c`` (a
CPU-bound loop that prints, each second, its iterations and the steal
time it saw) and one IOThread. On this host (2 CPUs, 1 NUMA node, CPU 0
not reserved, ratio 1) the guest is bound one-to-one to one pCPU, and
``[nova_pinning] emulator_threads`` decides where its emulator thread and
IOThread go: with ``guest`` onto that same pCPU, with ``shared`` onto the
other one, the pool pCPU no one-to-one vCPU holds.

Work on the emulator thread: a steady rate of QMP ``query-qmp-schema``
requests (``--rate`` per second, paced to a fixed schedule, through
``libvirt_qemu.qemuMonitorCommand``). qemu answers QMP in its main loop,
the emulator thread; each answer is a ~150 KiB JSON document built and
printed there.

Configurations, taking turns in every round (the order rotates), each
set by the package's own plan (``policy.make_plan`` with the setting,
written through libvirt: only the pins that differ):

* ``guest, idle``: no QMP load (the host's own noise);
* ``guest, QMP``: the emulator thread on the vCPU's pCPU;
* ``shared, QMP``: the emulator thread on the free pCPU.

This process (the QMP client) runs on the pCPU the guest's vCPU does not
hold, whatever the setting: its own work is host work the setting does
not move. libvirtd, which relays every request, floats as it always does.

Per turn, after 1 s to settle, a ``--window`` seconds window: the
guest's steal as the package reads it (``vcpu.0.delay`` over the window,
two ``Reconciler.vcpu_stats`` samples, as ``status`` and ``top``), its
CPU (``vcpu.0.time``), the guest's own steal figure (``MSR_KVM_STEAL_
TIME``, from the ticks it printed in the window, over real time), its
loop iterations per second (its clock), and the QMP requests answered
per second with their median latency. Medians over rounds; since the
host's other load drifts over tens of seconds, also the median of the
differences within each round (``guest, QMP`` minus ``shared, QMP``, two
turns a few seconds apart) and in how many rounds ``guest`` stole more.
The guest is destroyed at the end (and on error, SIGTERM included).
"""

import argparse
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import threading
import time

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
sys.path.insert(0, TOP)
sys.path.insert(0, os.path.join(TOP, 'benchmarks', 'steal'))

import libvirt  # noqa: E402
import libvirt_qemu  # noqa: E402
import run as steal_run  # noqa: E402  (benchmarks/steal/run.py)

from nova_pinning_hooks.engine import plan as plan_mod  # noqa: E402
from nova_pinning_hooks.engine import policy  # noqa: E402
from nova_pinning_hooks.engine import snapshot  # noqa: E402

NAME = 'nph-bench-emu-1'
TICK = re.compile(r'tick (\d+) iters (\d+) steal_us (\d+) wall_us (\d+)')
XML = """<domain type='kvm'><name>{name}</name><memory unit='MiB'>32</memory>
<vcpu>1</vcpu><iothreads>1</iothreads>
<os><type arch='x86_64' machine='pc'>hvm</type><kernel>{kernel}</kernel></os>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>
<serial type='file'><source path='{serial}'/><target port='0'/></serial>
</devices></domain>"""
CONFIGS = (('guest, idle', 'guest', False), ('guest, QMP', 'guest', True),
           ('shared, QMP', 'shared', True))
LIVE = libvirt.VIR_DOMAIN_AFFECT_LIVE


def apply(conn, dom, setting):
    """Plan the guest on this host with ``setting`` and write what
    differs; returns (writes, changes left after, emulator pin)."""
    def plan():
        data = snapshot.make(conn.getCapabilities(), [
            {'xml': dom.XMLDesc(0), 'active': True,
             'memory_by_node_kib': {'0': 32768}}], 1.0)
        snap = snapshot.load(data, emulator_threads=setting)
        p = policy.make_plan(snap.host, snap.guests, snap.options)
        return p, plan_mod.changes(p, snap.guests)
    p, changes = plan()
    ncpu = conn.getInfo()[2]
    for c in changes:
        cpumap = tuple(i in c.new for i in range(ncpu))
        if c.kind == 'vcpu':
            dom.pinVcpuFlags(c.index, cpumap, LIVE)
        elif c.kind == 'emulator':
            dom.pinEmulator(cpumap, LIVE)
        elif c.kind == 'iothread':
            dom.pinIOThread(c.index, cpumap, LIVE)
    _, left = plan()
    gp, = p.guests
    return len(changes), len(left), gp


class QmpLoad:
    """A thread sending ``rate`` QMP requests a second to a fixed
    schedule; counts answers and their latency."""

    def __init__(self, dom, rate):
        self.dom, self.rate = dom, rate
        self.stop = threading.Event()
        self.latency = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        period, due = 1.0 / self.rate, time.monotonic()
        while not self.stop.is_set():
            start = time.monotonic()
            libvirt_qemu.qemuMonitorCommand(
                self.dom, '{"execute":"query-qmp-schema"}', 0)
            self.latency.append(time.monotonic() - start)
            due += period
            wait = due - time.monotonic()
            if wait > 0:
                self.stop.wait(wait)
            else:  # behind: do not burst to catch up
                due = time.monotonic()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)


def ticks(serial, start, end):
    with open(serial) as f:
        f.seek(start)
        text = f.read(end - start)
    return [tuple(map(int, m)) for m in TICK.findall(text)]


def one_turn(conn, dom, conf, serial, config, rate, window):
    name, setting, load = config
    writes, left, gp = apply(conn, dom, setting)
    assert left == 0, '%s: %d changes left after writing' % (name, left)
    result = {'writes': writes, 'vcpu': sorted(gp.vcpu_pins[0]),
              'emulator': sorted(gp.emulator_pin)}
    uuid = dom.UUIDString()
    load_ctx = QmpLoad(dom, rate) if load else None
    if load_ctx:
        load_ctx.__enter__()
    try:
        time.sleep(1)
        done = len(load_ctx.latency) if load_ctx else 0
        first = steal_run._package_sample(conf, uuid)
        pos0 = os.path.getsize(serial)
        time.sleep(window)
        last = steal_run._package_sample(conf, uuid)
        pos1 = os.path.getsize(serial)
        answered = (len(load_ctx.latency) - done) if load_ctx else 0
        lat = list(load_ctx.latency[done:]) if load_ctx else []
    finally:
        if load_ctx:
            load_ctx.__exit__()
    span = last[0] - first[0]
    tk = ticks(serial, pos0, pos1)
    result.update(
        package_steal_pct=100.0 * (last[1] - first[1]) / (span * 1e9),
        package_cpu_pct=100.0 * (last[2] - first[2]) / (span * 1e9),
        guest_steal_pct=100.0 * sum(t[2] for t in tk) / (span * 1e6),
        iters_per_s=(sum(t[1] for t in tk) / (sum(t[3] for t in tk) / 1e6)
                     if tk else 0.0),
        qmp_per_s=answered / span,
        qmp_ms=1e3 * statistics.median(lat) if lat else 0.0)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=int, default=12)
    ap.add_argument('--window', type=float, default=5.0)
    ap.add_argument('--rate', type=float, default=20.0,
                    help='QMP requests per second')
    ap.add_argument('--json', metavar='FILE', help='every turn, as JSON')
    args = ap.parse_args()
    # timeout(1) and kill end the run through the clean-up below: the
    # guest is destroyed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    elf = steal_run.build(seconds=3600)
    conn = libvirt.open('qemu:///system')
    runs = {c[0]: [] for c in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)  # qemu (libvirt-qemu) writes the serial log
        serial = os.path.join(tmp, 'serial.log')
        conf = steal_run.make_conf(tmp)
        dom = conn.createXML(XML.format(name=NAME, kernel=elf,
                                        serial=serial), 0)
        try:
            time.sleep(3)  # past the guest's calibration
            _, _, gp = apply(conn, dom, 'guest')
            host_cpus = set(range(conn.getInfo()[2]))
            os.sched_setaffinity(0, host_cpus - set(gp.vcpu_pins[0]))
            for task in os.listdir('/proc/self/task'):
                os.sched_setaffinity(int(task),
                                     host_cpus - set(gp.vcpu_pins[0]))
            for rnd in range(args.rounds):
                k = rnd % len(CONFIGS)
                for config in CONFIGS[k:] + CONFIGS[:k]:
                    r = one_turn(conn, dom, conf, serial, config, args.rate,
                                 args.window)
                    r['round'] = rnd
                    runs[config[0]].append(r)
                    print('round %d %-12s %s' % (rnd, config[0], ' '.join(
                        '%s=%s' % (k, ('%.2f' % v if isinstance(v, float)
                                       else v)) for k, v in r.items())),
                          file=sys.stderr, flush=True)
        finally:
            dom.destroy()
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(runs, f, indent=1)
    print('| configuration | turns | package steal % (median) | per turn | '
          'guest MSR steal % (median) | vCPU CPU % | loop iterations/s '
          '(median) | QMP answers/s | QMP latency ms (median) |')
    print('|---|---|---|---|---|---|---|---|---|')
    for name, _, _ in CONFIGS:
        rs = runs[name]

        def med(key, rs=rs):
            return statistics.median(r[key] for r in rs)
        print('| %s | %d | %.1f | %s | %.1f | %.1f | %.0f | %.1f | %.1f |' % (
            name, len(rs), med('package_steal_pct'),
            ' '.join('%.1f' % r['package_steal_pct'] for r in rs),
            med('guest_steal_pct'), med('package_cpu_pct'),
            med('iters_per_s'), med('qmp_per_s'), med('qmp_ms')))
    pairs = [(a['package_steal_pct'] - b['package_steal_pct'],
              a['iters_per_s'] - b['iters_per_s'])
             for a, b in zip(runs['guest, QMP'], runs['shared, QMP'])]
    print()
    print('Within each round, guest minus shared (QMP load): package steal '
          '%+.1f points (median; per round %s), guest stole more in %d of '
          '%d rounds; loop iterations/s %+.0f (median).' % (
              statistics.median(p[0] for p in pairs),
              ' '.join('%+.1f' % p[0] for p in pairs),
              sum(p[0] > 0 for p in pairs), len(pairs),
              statistics.median(p[1] for p in pairs)))


if __name__ == '__main__':
    main()
