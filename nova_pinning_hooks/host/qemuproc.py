"""What the kernel enforces for a guest's qemu process, read from /proc.

libvirt's XML says where a vCPU *should* run; the kernel decides where it
*does*. A vCPU thread's cgroup cpuset or affinity changed behind
libvirt's back (by hand, by another tool) leaves the XML unchanged, so
``status`` and passes compare the two (``vcpu_affinity``).

libvirt starts qemu with ``-name ...,debug-threads=on``, so each vCPU
thread is named ``CPU <n>/KVM`` (``CPU <n>/TCG`` without KVM) in
``/proc/<pid>/task/<tid>/comm``.

Invariants:

* only /proc and the kernel are read; nothing is written;
* a process or thread that vanished while being read is left out, never
  an error: ``vcpu_affinity`` returns what it could read ({} for a gone
  process);
* reads are bounded: comm files are at most 16 bytes, schedstat and
  status files at most ``SCHEDSTAT_LIMIT`` and ``STATUS_LIMIT`` bytes,
  a command line at most ``CMDLINE_LIMIT`` bytes, read as regular files
  without following links (``safefs.read_file``);
* ``arrived`` says whether qemu was started to receive a guest
  (``-incoming``: a live migration's destination, a restore from a
  managed save or a suspend): an unreadable or oversized command line
  reads as not arrived, never an error.
"""

import os
import typing

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import safefs

SCHEDSTAT_LIMIT = 256
STATUS_LIMIT = 16384  # a thread's status file: about 1.5 KiB
# qemu's command line as libvirt builds it: 2-6 KiB for a nova guest
CMDLINE_LIMIT = 1 << 18
INCOMING = b'-incoming'


def qemu_pid(name: str, run_dir: str) -> typing.Optional[int]:
    """The pid libvirt recorded for a running guest, or None."""
    try:
        text = safefs.read_file(os.path.join(run_dir, name + '.pid'),
                                safefs.PIDFILE_LIMIT, 'pid file')
    except OSError:
        return None
    text = text.strip()
    if not (text.isdigit() and text.isascii()) or len(text) > 10:
        return None
    return int(text)


def vcpu_threads(pid: int, proc: str = '/proc') -> dict[int, int]:
    """{vCPU index: thread id} of a qemu process."""
    task_dir = os.path.join(proc, str(pid), 'task')
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return {}
    found = {}
    for tid in tids:
        if not (tid.isdigit() and tid.isascii()):
            continue
        try:
            with open(os.path.join(task_dir, tid, 'comm'), 'rb') as f:
                comm = f.read(32).strip()
        except OSError:
            continue  # the thread ended
        if comm.startswith(b'CPU ') and b'/' in comm:
            index = comm[4:comm.index(b'/')]
            if index.isdigit():
                found[int(index)] = int(tid)
    return found


def thread_affinity(pid: int, tid: int, proc: str = '/proc'
                    ) -> typing.Optional[frozenset[int]]:
    """The CPUs the kernel lets thread ``tid`` of process ``pid`` run on
    (its ``Cpus_allowed_list``: the mask ``sched_getaffinity`` returns,
    read under ``proc`` so that a test's /proc can stand in), or None:
    the thread ended, or the line is missing or unreadable.

    Cost: about 31 us a thread against 0.6 us for the system call (this
    project's machine), paid only for the guests a pass fetches (new or
    changed ones), each beside a libvirt ``XMLDesc`` call."""
    path = os.path.join(proc, str(pid), 'task', str(tid), 'status')
    try:
        text = safefs.read_file(path, STATUS_LIMIT, 'status')
    except OSError:
        return None
    for line in text.decode('ascii', 'replace').splitlines():
        if line.startswith('Cpus_allowed_list:'):
            try:
                return cpuset.parse(line.split(':', 1)[1].strip())
            except cpuset.CpusetError:
                return None
    return None


def vcpu_affinity(pid: int, proc: str = '/proc'
                  ) -> dict[int, frozenset[int]]:
    """{vCPU index: frozenset of CPUs the kernel lets it run on}: the
    one reader of vCPU affinity (passes compare it with libvirt's pins,
    the isolation agent finds the one-to-one CPUs from it)."""
    result = {}
    for vcpu, tid in vcpu_threads(pid, proc).items():
        cpus = thread_affinity(pid, tid, proc)
        if cpus is not None:
            result[vcpu] = cpus
    return result


def vcpu_schedstat(pid: int, proc: str = '/proc'
                   ) -> dict[int, tuple[int, int]]:
    """{vCPU index: (ns on a CPU, ns runnable but waiting)} of a qemu
    process, from each vCPU thread's ``schedstat`` (the kernel's
    ``sum_exec_runtime`` and ``run_delay``)."""
    result = {}
    for vcpu, tid in vcpu_threads(pid, proc).items():
        path = os.path.join(proc, str(pid), 'task', str(tid), 'schedstat')
        try:
            fields = safefs.read_file(path, SCHEDSTAT_LIMIT,
                                      'schedstat').split()
        except OSError:
            continue  # the thread ended
        if len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit():
            result[vcpu] = (int(fields[0]), int(fields[1]))
    return result


def arrived(pid: int, proc: str = '/proc') -> bool:
    """Whether qemu process ``pid`` was started with ``-incoming``: its
    guest's memory was written by qemu's incoming copy (live migration,
    restore, resume from suspend), not by its own vCPUs. One read of
    ``/proc/<pid>/cmdline`` (NUL-separated arguments); False if it
    cannot be read."""
    try:
        text = safefs.read_file(os.path.join(proc, str(pid), 'cmdline'),
                                CMDLINE_LIMIT, 'cmdline')
    except OSError:
        return False
    return INCOMING in text.split(b'\0')
