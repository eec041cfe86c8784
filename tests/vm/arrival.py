"""Run inside the VM (tests/vm/test_arrivals.py): an arrived guest's
memory split as an incoming copy splits it, and one move home.

    python3 arrival.py split PID NODE   # every other present page of
                                        # the qemu's anonymous mappings
                                        # not on NODE to NODE
                                        # (move_pages(2));
                                        # prints {"moved": n, "pages": n}
    python3 arrival.py move UUID HOME AWAY_KIB
                                        # host.memhome.move through the
                                        # installed package; prints its
                                        # outcome and libvirt calls
    python3 arrival.py fill PID MIB FILL_MIB
                                        # FILL_MIB of random data
                                        # written into the guest RAM
                                        # (qemu PID's mapping of MIB
                                        # MiB) from 16 MiB up; prints
                                        # {"filled_kib": n}
    python3 arrival.py migrate SRC DST NAME DNAME WATCH
                                        # a live migration of NAME from
                                        # SRC to DST as DNAME (virsh);
                                        # with WATCH > 0, its numa_maps
                                        # at DST sampled from the end of
                                        # the copy until one node holds
                                        # 90 % (2 s more) or WATCH s

Prints one JSON document on stdout.
"""

import ctypes
import json
import os
import subprocess
import sys
import time

import probe  # tests/vm/probe.py, beside this script

SYS_MOVE_PAGES = 279  # x86_64
MPOL_MF_MOVE = 2
CHUNK = 4096
PAGE = 4096


def _anon_ranges(pid):
    with open('/proc/%d/maps' % pid) as f:
        for line in f:
            fields = line.split()
            span, perms = fields[0], fields[1]
            path = fields[5] if len(fields) > 5 else ''
            if 'w' not in perms or (path and path != '[heap]'):
                continue
            start, end = (int(x, 16) for x in span.split('-'))
            yield start, end


def _move_pages(libc, pid, pages, nodes):
    n = len(pages)
    addrs = (ctypes.c_void_p * n)(*pages)
    status = (ctypes.c_int * n)()
    targets = (ctypes.c_int * n)(*nodes) if nodes is not None else None
    rc = libc.syscall(SYS_MOVE_PAGES, pid, n, addrs, targets, status,
                      MPOL_MF_MOVE if nodes is not None else 0)
    if rc < 0:
        raise OSError(ctypes.get_errno(), 'move_pages')
    return list(status)


def split(pid, node):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    present = []
    for start, end in _anon_ranges(pid):
        for base in range(start, end, PAGE * CHUNK):
            pages = list(range(base, min(end, base + PAGE * CHUNK), PAGE))
            status = _move_pages(libc, pid, pages, None)
            present += [p for p, s in zip(pages, status)
                        if s >= 0 and s != node]
    chosen = present[::2]
    moved = 0
    for i in range(0, len(chosen), CHUNK):
        part = chosen[i:i + CHUNK]
        status = _move_pages(libc, pid, part, [node] * len(part))
        moved += sum(1 for s in status if s == node)
    return {'moved': moved, 'pages': len(present)}


def move(uuid, home, away_kib):
    from nova_pinning_hooks.host import memhome
    from nova_pinning_hooks.host import virt
    host = virt.Host('qemu:///system', virt.HostOptions(
        busy_retries=0, busy_retry_delay=0.0, set_home_node=False,
        libvirt_call_timeout=30.0, kernel_affinity=True))
    try:
        outcome = memhome.move(host, uuid, home, away_kib, {0, 1})
        return {'result': outcome.result, 'reason': outcome.reason,
                'seconds': outcome.seconds, 'widened': outcome.widened,
                'calls': {k: host.calls[k] for k in ('read', 'write')}}
    finally:
        host.close()


def fill(pid, mib, fill_mib):
    """Random data (not zero pages, which a migration sends as a flag
    and the destination never touches) over the guest RAM from 16 MiB
    up, clear of SeaBIOS (its low megabyte and the top of RAM)."""
    size = mib << 20
    ram = [s for s, e in _anon_ranges(pid) if e - s == size]
    if len(ram) != 1:
        raise SystemExit('no single %d MiB mapping in qemu %d' % (mib, pid))
    block = os.urandom(1 << 20)
    end = min(16 + fill_mib, mib - 16) << 20
    with open('/proc/%d/mem' % pid, 'r+b', buffering=0) as mem:
        for off in range(16 << 20, end, len(block)):
            mem.seek(ram[0] + off)
            mem.write(block)
    return {'filled_kib': max(0, end - (16 << 20)) >> 10}


def _share(kib):
    total = sum(kib.values())
    return max(kib.values()) / total if total else 0.0


def migrate(src, dst, name, dname, watch):
    start = time.monotonic()
    done = subprocess.run(['virsh', '-q', '-c', src, 'migrate', '--live',
                           '--dname', dname, name, dst, 'tcp://127.0.0.1'],
                          capture_output=True, text=True, timeout=600,
                          check=False)
    if done.returncode:
        raise SystemExit('virsh migrate: %s' % done.stderr.strip())
    copied = time.monotonic()
    out = {'copy_seconds': round(copied - start, 2)}
    if watch <= 0:
        return out
    with open(os.path.join(probe.RUN, dname + '.pid')) as f:
        pid = int(f.read())
    samples, home_at = [], None
    while True:
        now = time.monotonic() - copied
        samples.append((round(now, 2), probe._numa_maps(pid)))
        if home_at is None and _share(samples[-1][1]) >= 0.9:
            home_at = now
        if now > watch or (home_at is not None and now > home_at + 2):
            break
        time.sleep(0.2)
    out.update(pid=pid, samples=samples, home_seconds=home_at)
    return out


def main(argv):
    if argv[1] == 'split':
        out = split(int(argv[2]), int(argv[3]))
    elif argv[1] == 'fill':
        out = fill(int(argv[2]), int(argv[3]), int(argv[4]))
    elif argv[1] == 'migrate':
        out = migrate(argv[2], argv[3], argv[4], argv[5], float(argv[6]))
    else:
        out = move(argv[2], int(argv[3]), int(argv[4]))
    print(json.dumps(out))


if __name__ == '__main__':
    main(sys.argv)
