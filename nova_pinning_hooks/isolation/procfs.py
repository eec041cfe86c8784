"""Reading processes from /proc, and deciding which ones may be moved.

Pure reads; every function takes the proc root so tests use a fake tree.

Never moved (``why_not_movable`` says why):

* pid 1 (moving init would drag every child it later forks), and
  ``kthreadd`` (pid 2) with every kernel thread (PF_KTHREAD, or a child of
  pid 2): their affinity is the kernel's business;
* processes whose command is in the exclusion list (Open vSwitch has its
  own isolation; qemu runs the guests);
* processes in libvirt's machine cgroups (``machine`` / ``machine.slice``):
  the guests, which live on the guest pool.
"""

import os
import typing

PF_KTHREAD = 0x00200000


class Proc(typing.NamedTuple):
    pid: int
    comm: str
    ppid: int
    flags: int
    start: int  # clock ticks after boot (identity against pid reuse)


def pids(proc='/proc'):
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit())


def read(pid, proc='/proc'):
    """The process, or None if it is gone or unreadable."""
    try:
        with open(os.path.join(proc, str(pid), 'stat'),
                  encoding='utf-8', errors='replace') as f:
            text = f.read()
    except OSError:
        return None
    # comm may hold spaces and parentheses: it ends at the last ')'.
    left, right = text.find('('), text.rfind(')')
    if left < 0 or right < left:
        return None
    fields = text[right + 2:].split()
    try:
        return Proc(pid, text[left + 1:right], int(fields[1]),
                    int(fields[6]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def cgroup_of(pid, controller, proc='/proc'):
    """The process's cgroup path for a v1 controller ('/' is the root),
    or the v2 path for controller ''. None if the process is gone."""
    try:
        with open(os.path.join(proc, str(pid), 'cgroup'),
                  encoding='utf-8') as f:
            for line in f:
                _, names, path = line.rstrip('\n').split(':', 2)
                if controller in names.split(',') or \
                        (controller == '' and names == ''):
                    return path
    except (OSError, ValueError):
        return None
    return None


def in_machine_cgroup(path):
    parts = (path or '').split('/')
    return 'machine' in parts or 'machine.slice' in parts


def why_not_movable(p, excluded_names, cgroup_path):
    """A reason the process must stay where it is, or None."""
    if p.pid == 1:
        return 'init'
    if p.pid == 2 or p.ppid == 2 or p.flags & PF_KTHREAD:
        return 'kernel thread'
    if p.comm in excluded_names:
        return 'excluded name %s' % p.comm
    if in_machine_cgroup(cgroup_path):
        return 'guest (machine cgroup)'
    return None


def boot_time(proc='/proc'):
    with open(os.path.join(proc, 'stat'), encoding='ascii') as f:
        for line in f:
            if line.startswith('btime '):
                return int(line.split()[1])
    raise OSError('no btime in %s/stat' % proc)


def started_at(p, proc='/proc'):
    """Wall-clock start time of the process, in seconds."""
    return boot_time(proc) + p.start / os.sysconf('SC_CLK_TCK')


def descendants(root_pid, proc='/proc'):
    """Every live descendant of ``root_pid`` (not itself)."""
    children = {}
    for pid in pids(proc):
        p = read(pid, proc)
        if p is not None:
            children.setdefault(p.ppid, []).append(pid)
    found, todo = set(), [root_pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found
