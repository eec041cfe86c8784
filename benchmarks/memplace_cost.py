#!/usr/bin/env python3
"""Memory placement: the memory cgroup's counters against numa_maps.

Usage (root, cgroup v1 or v2 with the memory controller):
    python benchmarks/memplace_cost.py [--gib 1,4,8] [--runs 9]

For each size it starts a child process that maps that much anonymous
memory with transparent huge pages refused (``MADV_NOHUGEPAGE``, so 4 KiB
pages, as a guest without huge pages has), touches every page, and moves
itself into a memory cgroup of its own (as libvirt puts each qemu in one).
Then it times, per call, the two ways the package can learn where the
process's memory lies: ``memplace.from_cgroup`` (``memory.numa_stat``)
and ``virtread.read_memory_by_node`` (``/proc/PID/numa_maps``, which walks
the page tables under the process's mm lock). Median of --runs calls;
both answers are printed to show they agree.
"""

import argparse
import mmap
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from nova_pinning_hooks.host import memplace  # noqa: E402
from nova_pinning_hooks.host import virtread  # noqa: E402

CHILD = r'''
import mmap, os, sys
size = int(sys.argv[1])
sys.stdin.readline()  # moved into its cgroup: touch now
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_NOHUGEPAGE)
page = mmap.PAGESIZE
for off in range(0, size, page):
    m[off] = 1
sys.stdout.write('ready\n')
sys.stdout.flush()
sys.stdin.read()
'''


def cgroup_for(pid):
    """Put ``pid`` in a memory cgroup of its own; its directory."""
    v1 = '/sys/fs/cgroup/memory'
    if os.path.isdir(v1):
        path = os.path.join(v1, 'nph-memplace-bench')
    else:
        path = '/sys/fs/cgroup/nph-memplace-bench'
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, 'cgroup.procs'), 'w') as f:
        f.write(str(pid))
    return path


def median_ms(func, pid, runs):
    times = []
    result = None
    for _ in range(runs):
        start = time.perf_counter()
        result = func(pid)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--gib', default='1,4,8')
    ap.add_argument('--runs', type=int, default=9)
    args = ap.parse_args()
    print('| guest memory (4 KiB pages) | memory.numa_stat (ms) | '
          'numa_maps (ms) | ratio | agree |')
    print('|---|---|---|---|---|')
    for gib in (float(g) for g in args.gib.split(',')):
        size = int(gib * (1 << 30)) // mmap.PAGESIZE * mmap.PAGESIZE
        child = subprocess.Popen([sys.executable, '-c', CHILD, str(size)],
                                 stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        try:
            # Moved before it touches its pages: they are charged to
            # the cgroup it is in when they are first touched.
            path = cgroup_for(child.pid)
            child.stdin.write('go\n')
            child.stdin.flush()
            if child.stdout.readline().strip() != 'ready':
                raise SystemExit('memplace_cost: the child failed')
            cg_ms, cg = median_ms(memplace.from_cgroup, child.pid,
                                  args.runs)
            maps_ms, maps = median_ms(virtread.read_memory_by_node, child.pid,
                                      args.runs)
            agree = cg is not None and all(
                abs(cg.get(n, 0) - kib) <= max(kib, 1) * 0.02 + 4096
                for n, kib in maps.items())
            print('| %g GiB | %.3f | %.1f | %.0fx | %s (%s vs %s KiB) |' % (
                gib, cg_ms, maps_ms, maps_ms / cg_ms if cg_ms else 0,
                'yes' if agree else 'NO', cg, maps))
        finally:
            child.stdin.close()
            child.wait(timeout=60)
            try:
                os.rmdir(path)
            except OSError:
                pass


if __name__ == '__main__':
    main()
