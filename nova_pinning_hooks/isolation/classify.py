"""Which host processes may be moved into the host group (cgroup v1).

``Rules`` holds the decision's inputs; ``verdict`` reads one process from
/proc and says ``CONFINED`` (already in the host group), ``MOVABLE``, or
the reason it must stay where it is. Pure reads.

Never moved, whatever the configuration:

* pid 1 (init): every process it forks later would start confined;
* kernel threads (kthreadd, its children, anything flagged PF_KTHREAD):
  their CPUs are the kernel's business;
* zombies (nothing left to move);
* guests: any process in libvirt's machine cgroups (``machine``,
  ``machine.slice``) in any hierarchy;
* processes whose threads sit in different cpuset groups: writing the
  pid to cgroup.procs would flatten a placement someone made on purpose.

And by configuration: names in ``exclude_process_names`` (matched on
comm, which the kernel truncates to 15 characters), processes outside
the ``move_from_groups`` cpuset groups (another tool placed them), and,
for trials, processes that do not descend from ``only_descendants_of``.
"""

import typing

from nova_pinning_hooks.host import procfs

CONFINED = 'confined'
MOVABLE = 'movable'
MACHINE_GROUPS = frozenset(['machine', 'machine.slice'])


class Rules(typing.NamedTuple):
    group: str                  # the host group's cpuset path, '/x'
    excluded_names: frozenset[str]  # comm values (already truncated)
    move_from: frozenset[str]   # cpuset paths processes are moved from
    only_descendants_of: typing.Optional[int] = None


def comm_names(names: typing.Iterable[str]) -> frozenset[str]:
    """Configured process names as the kernel shows them in comm."""
    return frozenset(n.strip()[:procfs.COMM_LEN] for n in names
                     if n.strip())


def in_machine_cgroup(groups: typing.Mapping[str, str]) -> bool:
    return any(MACHINE_GROUPS & set(path.split('/'))
               for path in groups.values())


def _fixed_reason(p: procfs.Proc,
                  groups: typing.Mapping[str, str]) -> typing.Optional[str]:
    if p.pid == 1:
        return 'init'
    if p.pid == 2 or p.ppid == 2 or p.flags & procfs.PF_KTHREAD:
        return 'kernel thread'
    if p.state == 'Z':
        return 'zombie'
    if in_machine_cgroup(groups):
        return 'guest (machine cgroup)'
    return None


def _threads_split(pid: int, path: str, proc: str) -> bool:
    for tid in procfs.threads(pid, proc):
        if tid == pid:
            continue
        groups = procfs.cgroups(pid, proc, tid=tid)
        if groups is not None and groups.get('cpuset', path) != path:
            return True
    return False


def verdict(p: procfs.Proc, rules: Rules, proc: str = '/proc',
            family: typing.Optional[typing.AbstractSet[int]] = None
            ) -> tuple[str, typing.Optional[dict[str, str]]]:
    """``(verdict, cgroups)`` for process ``p``: CONFINED, MOVABLE or a
    reason to leave it, and its ``{controller: path}`` (None if it is
    gone). ``family``: the descendants of ``rules.only_descendants_of``
    if the caller already has them (a sweep); else they are looked up."""
    groups = procfs.cgroups(p.pid, proc)
    if groups is None:
        return 'gone', None
    path = groups.get('cpuset')
    if path is None:
        return 'no cpuset hierarchy', groups
    why = _fixed_reason(p, groups)
    if why:
        return why, groups
    if p.comm in rules.excluded_names:
        return 'excluded name %s' % p.comm, groups
    root = rules.only_descendants_of
    if root is not None:
        inside = (p.pid in family if family is not None
                  else procfs.is_descendant(p.pid, root, proc))
        if not inside:
            return 'not a descendant of %d' % root, groups
    if path == rules.group:
        return CONFINED, groups
    if path not in rules.move_from:
        return 'in cpuset group %s' % path, groups
    if _threads_split(p.pid, path, proc):
        return 'threads in other cpuset groups', groups
    return MOVABLE, groups


def scan(rules: Rules, proc: str = '/proc'
         ) -> list[tuple[procfs.Proc, str, dict[str, str]]]:
    """``[(proc, verdict, cgroups)]`` for every process considered: all
    of them, or the descendants of ``rules.only_descendants_of``."""
    family: typing.Optional[set[int]] = None
    pids = procfs.pids(proc)
    if rules.only_descendants_of is not None:
        family = procfs.descendants(rules.only_descendants_of, proc)
        pids = sorted(family)
    result: list[tuple[procfs.Proc, str, dict[str, str]]] = []
    for pid in pids:
        p = procfs.read(pid, proc)
        if p is not None:
            v, groups = verdict(p, rules, proc, family)
            if groups is not None:
                result.append((p, v, groups))
    return result
