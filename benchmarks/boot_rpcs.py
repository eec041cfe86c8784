#!/usr/bin/env python3
"""Where a pin call's time goes while guests boot in parallel.

Usage (root, libvirtd running: tools/setup-host.sh):
    python benchmarks/boot_rpcs.py [--guests 20]

No package code runs: this looks at libvirtd alone. One probe guest is
started first and left to settle. Then N tiny guests (as in
``parallel_boots.py``) are created at once, one thread each over one
connection, while, each on a connection of its own:

* a probe times, every 20 ms, the calls a pass makes (listing, paused
  listing, state, XMLDesc, the host CPU map libvirt-python asks for inside
  each pin call, a vCPU pin and an emulator pin) on the settled guest;
* a watcher lists the active domains every 20 ms and asks each new one
  for its state; the first time it sees one paused for "starting up" it
  pins that guest's vCPU 0 to every CPU (what a pass did before it
  skipped starting guests) and times the call;
* libvirtd's worker pool is read with ``virt-admin srv-threadpool-info``
  every 200 ms, and its threads' CPU time and run-queue wait
  (``/proc/<pid>/task/*/schedstat``) before and after.

Printed: each call's median and longest time, idle (the 2 s before the
burst) and during the burst; the worker pool's busiest reading; per
guest, how long it was listed while starting up, and how long the pin
issued then took against when its createXML returned.
"""

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

import libvirt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from benchmarks import parallel_boots  # noqa: E402
from benchmarks.parallel_boots import URI, XML, virt_type  # noqa: E402

PREFIX = 'nph-rpcs-'
LIVE = libvirt.VIR_DOMAIN_AFFECT_LIVE
STARTING = (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_STARTING_UP)


def xml(name):
    return XML.format(type=virt_type(), name=name)


def cleanup(conn):
    parallel_boots.cleanup(conn, PREFIX)


def schedstat(pid):
    """(CPU ns, run-queue wait ns) summed over a process's threads."""
    total = [0, 0]
    for tid in os.listdir('/proc/%d/task' % pid):
        try:
            with open('/proc/%d/task/%s/schedstat' % (pid, tid)) as f:
                fields = f.read().split()
        except OSError:
            continue
        total[0] += int(fields[0])
        total[1] += int(fields[1])
    return total


def pool_info():
    try:
        out = subprocess.run(
            ['virt-admin', 'srv-threadpool-info', 'libvirtd'],
            capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {k.strip(): int(v) for k, _, v in
            (line.partition(':') for line in out.splitlines())
            if v.strip().isdigit()}


class Burst:

    def __init__(self, n):
        self.n = n
        self.samples = []  # (start, call, seconds)
        self.pool = []
        self.created = {}  # name -> createXML returned
        self.starting = {}  # name -> first seen starting up
        self.pins = {}  # name -> (issued, returned)
        self.stop = threading.Event()

    def probe(self, conn, dom):
        cpus = (True,) * conn.getInfo()[2]
        calls = (
            ('listAllDomains', lambda: conn.listAllDomains(1)),
            ('listAllDomains(paused)', lambda: conn.listAllDomains(
                libvirt.VIR_CONNECT_LIST_DOMAINS_PAUSED)),
            ('state', dom.state),
            ('XMLDesc', lambda: dom.XMLDesc(0)),
            ('getCPUMap', conn.getCPUMap),
            ('pinVcpuFlags', lambda: dom.pinVcpuFlags(0, cpus, LIVE)),
            ('pinEmulator', lambda: dom.pinEmulator(cpus, LIVE)),
        )
        while not self.stop.is_set():
            for name, call in calls:
                start = time.monotonic()
                call()
                self.samples.append((start, name, time.monotonic() - start))
            time.sleep(0.02)

    def watch(self, conn):
        cpus = (True,) * conn.getInfo()[2]
        while not self.stop.is_set():
            for dom in conn.listAllDomains(1):
                name = dom.name()
                if name in self.starting or not name.startswith(PREFIX) or \
                        name.endswith('probe'):
                    continue
                try:
                    if tuple(dom.state()) != STARTING:
                        continue
                except libvirt.libvirtError:
                    continue
                self.starting[name] = time.monotonic()
                threading.Thread(target=self.pin, args=(dom, cpus),
                                 daemon=True).start()
            time.sleep(0.02)

    def pin(self, dom, cpus):
        issued = time.monotonic()
        try:
            dom.pinVcpuFlags(0, cpus, LIVE)
        except libvirt.libvirtError:
            return
        self.pins[dom.name()] = (issued, time.monotonic())

    def poll_pool(self):
        while not self.stop.is_set():
            self.pool.append(pool_info())
            time.sleep(0.2)

    def run(self):
        conn = libvirt.open(URI)
        cleanup(conn)
        probe_conn, watch_conn = libvirt.open(URI), libvirt.open(URI)
        probe = conn.createXML(xml(PREFIX + 'probe'), 0)
        time.sleep(2)
        probe = probe_conn.lookupByUUIDString(probe.UUIDString())
        daemon = int(subprocess.check_output(['pgrep', '-o', '-x',
                                              'libvirtd']))
        threads = [threading.Thread(target=self.probe,
                                    args=(probe_conn, probe), daemon=True)]
        threads[0].start()
        time.sleep(2)
        for target, args in ((self.watch, (watch_conn,)),
                             (self.poll_pool, ())):
            threads.append(threading.Thread(target=target, args=args,
                                            daemon=True))
            threads[-1].start()
        sched = schedstat(daemon)

        def create(name):
            conn.createXML(xml(name), 0)
            self.created[name] = time.monotonic()
        creates = [threading.Thread(target=create, args=(PREFIX + str(i),))
                   for i in range(self.n)]
        self.start = time.monotonic()
        for t in creates:
            t.start()
        for t in creates:
            t.join()
        self.end = time.monotonic()
        self.sched = [b - a for a, b in zip(sched, schedstat(daemon))]
        time.sleep(1)
        self.stop.set()
        for t in threads:
            t.join(10)
        cleanup(conn)

    def report(self):
        print('burst of %d guests: %.2f s; libvirtd threads meanwhile: '
              '%.2f s on a CPU, %.2f s waiting for one' % (
                  self.n, self.end - self.start, self.sched[0] / 1e9,
                  self.sched[1] / 1e9))
        print()
        print('| call | idle median (ms) | idle max (ms) | burst median '
              '(ms) | burst max (ms) | burst calls |')
        print('|---|---|---|---|---|---|')
        names = list(dict.fromkeys(name for _, name, _ in self.samples))
        for name in names:
            idle = [s * 1e3 for t, c, s in self.samples
                    if c == name and t < self.start]
            busy = [s * 1e3 for t, c, s in self.samples
                    if c == name and self.start <= t < self.end]
            if idle and busy:
                print('| %s | %.1f | %.1f | %.1f | %.1f | %d |' % (
                    name, statistics.median(idle), max(idle),
                    statistics.median(busy), max(busy), len(busy)))
        readings = [p for p in self.pool if p]
        if readings:
            print()
            print('libvirtd worker pool, %d readings: at most %d workers '
                  '(max %d), at least %d free, job queue at most %d' % (
                      len(readings),
                      max(p.get('nWorkers', 0) for p in readings),
                      readings[0].get('maxWorkers', 0),
                      min(p.get('freeWorkers', 0) for p in readings),
                      max(p.get('jobQueueDepth', 0) for p in readings)))
        print()
        print('| guest | listed while starting up (s) | pin issued then '
              'took (s) | pin returned after its createXML (s) |')
        print('|---|---|---|---|')
        for name in sorted(self.created, key=self.created.get):
            seen = self.starting.get(name)
            pin = self.pins.get(name)
            print('| %s | %s | %s | %s |' % (
                name,
                '%.2f' % (self.created[name] - seen) if seen else '-',
                '%.2f' % (pin[1] - pin[0]) if pin else '-',
                '%+.3f' % (pin[1] - self.created[name]) if pin else '-'))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--guests', type=int, default=20)
    args = ap.parse_args()
    burst = Burst(args.guests)
    burst.run()
    burst.report()


if __name__ == '__main__':
    main()
