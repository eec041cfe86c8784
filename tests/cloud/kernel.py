"""What the kernel says of a cloud guest's vCPU threads, read from /proc
(no libvirt, no nova): shared by tests/cloud, benchmarks/cloud_boots.py
and ``tools/cloud.sh demo``. Standard library only.

A guest's qemu pid is in its compute's libvirt run directory (that
host's namespace's /run, kept under the cloud's state directory; with
nph-compute2 in kolla's containers, ``cloud.sh up --compute2 kolla``,
the containers' /run at the same place, and nova_libvirt in the host's
PID namespace, so the pid is the host's); its vCPU threads are the tasks
named "CPU N/KVM".
"""

import os

STATE = os.environ.get('NPH_CLOUD_STATE', '/var/lib/nph-cloud')
HOSTS = ('nph-compute1', 'nph-compute2')
# Each host's address and libvirtd port (tools/cloud.sh).
LIBVIRT_URIS = {'nph-compute1': 'qemu+tcp://127.0.0.11:16521/system',
                'nph-compute2': 'qemu+tcp://127.0.0.12:16522/system'}


def cpus(text):
    out = set()
    for part in text.strip().split(','):
        if not part:
            continue
        lo, _, hi = part.partition('-')
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def host_index(host):
    return HOSTS.index(host) + 1


def qemu_pid(host, instance_name):
    path = os.path.join(STATE, 'compute%d' % host_index(host), 'run',
                        'libvirt', 'qemu', instance_name + '.pid')
    try:
        with open(path) as f:
            pid = int(f.read().strip())
        # A stale pid file's pid may be another process's by now.
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            if b'guest=%s,' % instance_name.encode() not in f.read():
                return None
        return pid
    except (OSError, ValueError):
        return None


def cpus_allowed(pid):
    """The CPUs process ``pid`` may run on, from /proc."""
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('Cpus_allowed_list:'):
                return cpus(line.split(':', 1)[1])
    raise AssertionError('no Cpus_allowed_list for pid %d' % pid)


def vcpu_threads(pid):
    """{vCPU index: allowed CPUs} of a qemu process, from /proc."""
    out = {}
    try:
        tids = os.listdir('/proc/%d/task' % pid)
    except OSError:
        return out
    for tid in tids:
        base = '/proc/%d/task/%s/' % (pid, tid)
        try:
            with open(base + 'comm') as f:
                comm = f.read().strip()
            if not (comm.startswith('CPU ') and comm.endswith('/KVM')):
                continue
            with open(base + 'status') as f:
                for line in f:
                    if line.startswith('Cpus_allowed_list:'):
                        out[int(comm[4:-4])] = cpus(line.split(':')[1])
        except (OSError, ValueError):
            continue
    return out
