#!/usr/bin/env python3
"""What the vCPU hot-plug poll costs libvirtd, on the real daemon.

Usage (root, libvirtd running: tools/setup-host.sh):
    python benchmarks/poll_cost.py [--guests 0,10,40] [--polls 200]

libvirt raises no event for a vCPU hot-plug, so the agent asks for every
running guest's vCPU count every ``vcpu_poll_interval`` (1 s by default):
``virt.Host.vcpu_counts``, a listing and one ``vcpusFlags(AFFECT_LIVE)``
a guest (libvirt's live definition: no job, no qemu monitor). Beside it,
what the first version did, one ``getAllDomainStats(VCPU, ACTIVE |
NOWAIT)``, whose vCPU group asks each guest's qemu monitor. This
measures both with N tiny running KVM guests (64 MiB, 1 vCPU, no disk; named ``nph-bench-poll-*``, destroyed
at the end), --polls times back to back on one connection, and reports
per poll: wall time (median and 95th percentile), the CPU time libvirtd
spent (its ``/proc/PID/stat`` utime + stime over the run, divided by the
polls, so it includes whatever else libvirtd did meanwhile: run it on a
quiet host) and this process's own, and what that makes of one CPU at
the default interval. The cost per guest is the slope between the rows.

The whole run holds ``/run/nph-functional.lock``, as the functional
tests do: their guests and these would otherwise disturb each other.
"""

import argparse
import fcntl
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

import libvirt  # noqa: E402

from nova_pinning_hooks.host import virt  # noqa: E402
from tests.fixtures import host_options  # noqa: E402

URI = 'qemu:///system'
PREFIX = 'nph-bench-poll-'
LOCK = '/run/nph-functional.lock'
XML = ("<domain type='{type}'><name>{name}</name><memory unit='MiB'>64"
       "</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm"
       "</type></os><devices><emulator>/usr/bin/qemu-system-x86_64"
       "</emulator></devices></domain>")
TICK = os.sysconf('SC_CLK_TCK')


def libvirtd_pid():
    out = subprocess.run(['pgrep', '-x', 'libvirtd'], capture_output=True,
                         text=True, timeout=10, check=False).stdout.split()
    if len(out) != 1:
        sys.exit('poll_cost: want exactly one libvirtd, found %r' % out)
    return int(out[0])


def cpu_seconds(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def destroy_ours(conn):
    for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
        if dom.name().startswith(PREFIX):
            try:
                dom.destroy()
            except libvirt.libvirtError:
                pass  # ended meanwhile


def boot_up_to(conn, count, virt_type):
    have = [d for d in conn.listAllDomains(
        libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        if d.name().startswith(PREFIX)]
    for i in range(len(have), count):
        conn.createXML(XML.format(type=virt_type, name='%s%d' % (PREFIX, i)),
                       0)


def bulk_counts(conn):
    """The first version's poll: one call, every guest's monitor asked."""
    flags = libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE | getattr(
        libvirt, 'VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT', 0)
    return {dom.UUIDString(): stats.get('vcpu.current')
            for dom, stats in conn.getAllDomainStats(
                libvirt.VIR_DOMAIN_STATS_VCPU, flags)}


def measure(poll, daemon, polls):
    poll()  # the connection made outside the figures
    walls = []
    daemon_before = cpu_seconds(daemon)
    self_before = time.process_time()
    for _ in range(polls):
        start = time.perf_counter()
        counts = poll()
        walls.append(time.perf_counter() - start)
    daemon_cpu = (cpu_seconds(daemon) - daemon_before) / polls
    self_cpu = (time.process_time() - self_before) / polls
    walls.sort()
    return {'guests': len(counts),
            'median_ms': statistics.median(walls) * 1e3,
            'p95_ms': walls[int(0.95 * (len(walls) - 1))] * 1e3,
            'libvirtd_cpu_ms': daemon_cpu * 1e3,
            'own_cpu_ms': self_cpu * 1e3}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--guests', default='0,10,40')
    parser.add_argument('--polls', type=int, default=200)
    parser.add_argument('--virt-type', default='kvm')
    args = parser.parse_args()
    counts = sorted(int(n) for n in args.guests.split(','))

    with open(LOCK, 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = libvirt.open(URI)
        daemon = libvirtd_pid()
        host = virt.Host(URI, host_options())
        rows = []
        try:
            for count in counts:
                boot_up_to(conn, count, args.virt_type)
                time.sleep(2)  # past the guests' own start-up
                for way, poll in (('per guest', host.vcpu_counts),
                                  ('bulk stats', lambda: bulk_counts(conn))):
                    rows.append(dict(measure(poll, daemon, args.polls),
                                     way=way))
        finally:
            host.close()
            destroy_ours(conn)
            conn.close()

    print('vCPU count poll, %d polls each, libvirt %s; per guest: '
          'vcpu_counts (vcpusFlags live), bulk stats: getAllDomainStats '
          'VCPU' % (args.polls, libvirt.getVersion()))
    print('%7s %-11s %10s %10s %15s %12s %19s' % (
        'guests', 'way', 'median ms', 'p95 ms', 'libvirtd CPU ms',
        'own CPU ms', 'libvirtd CPU at 1 s'))
    for r in rows:
        print('%7d %-11s %10.2f %10.2f %15.2f %12.2f %18.2f%%' % (
            r['guests'], r['way'], r['median_ms'], r['p95_ms'],
            r['libvirtd_cpu_ms'], r['own_cpu_ms'],
            r['libvirtd_cpu_ms'] / 10))


if __name__ == '__main__':
    main()
