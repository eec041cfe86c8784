"""Reading processes from /proc. Pure reads, nothing else.

Every function takes the proc root so that tests use a fake tree, and
returns None (or an empty result) for a process that is gone or cannot be
read: processes exit at any moment and the caller must cope.

A process's identity is ``(pid, start)``: ``start`` is field 22 of
/proc/PID/stat, its start time in clock ticks after boot. A pid that
is reused belongs to a process with another start time.
"""

import os
import typing

PF_KTHREAD = 0x00200000
COMM_LEN = 15  # the kernel truncates comm to TASK_COMM_LEN - 1 bytes


class Proc(typing.NamedTuple):
    pid: int
    comm: str
    state: str  # R, S, D, Z (zombie), ...
    ppid: int
    flags: int
    start: int  # clock ticks after boot (identity against pid reuse)


def pids(proc: str = '/proc') -> list[int]:
    """Every thread-group id (process) now listed in /proc, sorted."""
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit())


def read(pid: int, proc: str = '/proc') -> typing.Optional[Proc]:
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
        # fields[0] is field 3 (state): ppid is 4, flags 9, start 22.
        return Proc(pid, text[left + 1:right], fields[0], int(fields[1]),
                    int(fields[6]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def same(pid: int, start: int,
         proc: str = '/proc') -> typing.Optional[Proc]:
    """The process now holding ``pid`` if it is the one that started at
    ``start`` (not a reuse of the pid), else None."""
    p = read(pid, proc)
    return p if p is not None and p.start == start else None


def argv0(pid: int, proc: str = '/proc') -> str:
    """Basename of the first command-line word ('' if none/unreadable):
    names longer than comm's 15 bytes can be matched in full."""
    try:
        with open(os.path.join(proc, str(pid), 'cmdline'), 'rb') as f:
            first = f.read(4096).split(b'\0', 1)[0]
    except OSError:
        return ''
    return os.path.basename(first.decode('utf-8', 'replace'))


def _parse_cgroups(text: str) -> dict[str, str]:
    """``{controller: path}``; the cgroup v2 line is under ''."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        try:
            _, names, path = line.split(':', 2)
        except ValueError:
            continue
        for name in names.split(',') if names else ['']:
            result[name] = path
    return result


def cgroups(pid: int, proc: str = '/proc', tid: typing.Optional[int] = None
            ) -> typing.Optional[dict[str, str]]:
    """The cgroups of a process (or of one of its threads) as
    ``{controller: path}``, '' being the v2 hierarchy; None if gone."""
    parts = [proc, str(pid)] + (['task', str(tid)] if tid else [])
    try:
        with open(os.path.join(*parts, 'cgroup'), encoding='utf-8') as f:
            return _parse_cgroups(f.read())
    except OSError:
        return None


def threads(pid: int, proc: str = '/proc') -> list[int]:
    """Thread ids of the process (empty if it is gone)."""
    try:
        return sorted(int(t) for t in
                      os.listdir(os.path.join(proc, str(pid), 'task'))
                      if t.isdigit())
    except OSError:
        return []


def boot_time(proc: str = '/proc') -> int:
    with open(os.path.join(proc, 'stat'), encoding='ascii') as f:
        for line in f:
            if line.startswith('btime '):
                return int(line.split()[1])
    raise OSError('no btime in %s/stat' % proc)


def started_at(p: Proc, proc: str = '/proc') -> float:
    """Wall-clock start time of the process, in seconds."""
    return boot_time(proc) + p.start / os.sysconf('SC_CLK_TCK')


def parents(proc: str = '/proc') -> dict[int, int]:
    """``{pid: ppid}`` of every process now alive."""
    result: dict[int, int] = {}
    for pid in pids(proc):
        p = read(pid, proc)
        if p is not None:
            result[pid] = p.ppid
    return result


def descendants(root_pid: int, proc: str = '/proc') -> set[int]:
    """Every live descendant of ``root_pid`` (not itself)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents(proc).items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [root_pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def is_descendant(pid: int, root_pid: int, proc: str = '/proc') -> bool:
    """Whether ``pid`` descends from ``root_pid`` (walks up the ppids)."""
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        p = read(pid, proc)
        if p is None:
            return False
        if p.ppid == root_pid:
            return True
        pid = p.ppid
    return False
