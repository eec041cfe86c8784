"""Run inside the VM: what the kernel says about guests and processes.

Prints one JSON document on stdout. Only /proc and /sys/fs/cgroup are
read, never libvirt, so the tests compare the package's view with the
kernel's:

    python3 probe.py guests NAME...   # per guest: pid, each vCPU
                                      # thread's Cpus_allowed_list, the
                                      # emulator's, the v2 cgroup
                                      # cpusets, numa_maps per node
    python3 probe.py procs COMM...    # per process name: its oldest
                                      # pid's Cpus_allowed_list
"""

import glob
import json
import os
import sys

RUN = '/run/libvirt/qemu'
CGROUP = '/sys/fs/cgroup'


def _read(path):
    with open(path) as f:
        return f.read().strip()


def _allowed(status_path):
    for line in _read(status_path).splitlines():
        if line.startswith('Cpus_allowed_list:'):
            return line.split(':', 1)[1].strip()
    return None


def _cgroup(pid):
    for line in _read('/proc/%d/cgroup' % pid).splitlines():
        if line.startswith('0::'):
            return line[3:]
    return None


def _numa_maps(pid):
    """KiB of anonymous memory per node, from numa_maps."""
    page_kib = os.sysconf('SC_PAGE_SIZE') // 1024
    nodes = {}
    for line in _read('/proc/%d/numa_maps' % pid).splitlines():
        fields = line.split()
        if not any(f.startswith('anon=') for f in fields):
            continue
        kib = page_kib
        for f in fields:
            if f.startswith('kernelpagesize_kB='):
                kib = int(f.split('=')[1])
        for f in fields:
            if f[:1] == 'N' and '=' in f:
                node, count = f[1:].split('=')
                nodes[node] = nodes.get(node, 0) + int(count) * kib
    return nodes


def guest(name):
    pid = int(_read(os.path.join(RUN, name + '.pid')))
    vcpus, others = {}, set()
    for task in glob.glob('/proc/%d/task/*' % pid):
        comm = _read(task + '/comm')
        allowed = _allowed(task + '/status')
        if comm.startswith('CPU ') and '/' in comm:
            vcpus[comm[4:comm.index('/')]] = allowed
        else:
            others.add(allowed)
    cgroup = _cgroup(pid)
    # qemu's main thread is in .../libvirt/emulator; its siblings are
    # the vCPU groups.
    base = os.path.dirname(os.path.join(CGROUP, cgroup.lstrip('/')))
    cpusets = {}
    for d in sorted(glob.glob(base + '/*/')):
        key = os.path.basename(d.rstrip('/'))
        cpusets[key] = {'cpus': _read(d + 'cpuset.cpus'),
                        'mems': _read(d + 'cpuset.mems')}
    return {'pid': pid, 'vcpus': vcpus, 'emulator': sorted(others),
            'cgroup': cgroup, 'cpusets': cpusets,
            'domain_mems': _read(base + '/cpuset.mems'),
            'numa_maps_kib': _numa_maps(pid)}


def procs(comm):
    found = []
    for stat in glob.glob('/proc/[0-9]*/comm'):
        try:
            if _read(stat) == comm:
                pid = int(stat.split('/')[2])
                found.append((os.stat('/proc/%d' % pid).st_ctime, pid))
        except OSError:
            continue
    if not found:
        return None
    pid = min(found)[1]
    return {'pid': pid, 'allowed': _allowed('/proc/%d/status' % pid)}


def main(argv):
    what, names = argv[0], argv[1:]
    probe = {'guests': guest, 'procs': procs}[what]
    json.dump({name: probe(name) for name in names}, sys.stdout, indent=1)


if __name__ == '__main__':
    main(sys.argv[1:])
