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

Prints one JSON document on stdout.
"""

import ctypes
import json
import sys

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


def main(argv):
    if argv[1] == 'split':
        out = split(int(argv[2]), int(argv[3]))
    else:
        out = move(argv[2], int(argv[3]), int(argv[4]))
    print(json.dumps(out))


if __name__ == '__main__':
    main(sys.argv)
