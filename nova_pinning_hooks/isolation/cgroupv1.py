"""cgroup v1 backend: a cpuset group (and optionally a memory group) that
holds host processes.

Interface shared with ``systemd.Systemd``: ``name``, ``moves_processes``,
``record()`` (what to store before the first change), ``ensure()``
(idempotent), ``status()``. This one also ``move``s processes and puts
them back (``move_back``).

Facts of the kernel this relies on:

* writing a pid to ``cgroup.procs`` moves the whole thread group; a pid
  that has exited gives ESRCH;
* a new cpuset group has empty ``cpuset.mems``/``cpuset.cpus``, and no
  task may join it before both are set (mems first);
* attaching to a cpuset resets every thread's affinity to the group's
  CPUs, and so does moving back: a thread whose affinity was narrower
  than its origin group's CPUs has it recorded (``narrow_affinity``) and
  set again by ``move_back``;
* a group can only be removed once it holds no process.
"""

import errno
import os
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import procfs
from nova_pinning_hooks.host import qemuproc
from nova_pinning_hooks.isolation import BackendError
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation import statusfile

LOG = logging.getLogger(__name__)


# The only three functions that change the host; tests replace them with
# a fake kernel.
def _write(path: str, value: str) -> None:
    with open(path, 'w', encoding='ascii') as f:
        f.write(value)


def _rmdir(path: str) -> None:
    os.rmdir(path)  # cgroupfs removes the control files with the group


def _set_affinity(tid: int, cpus: frozenset[int]) -> None:
    os.sched_setaffinity(tid, cpus)


def _read(path: str) -> str:
    with open(path, encoding='ascii') as f:
        return f.read().strip()


def _read_set(path: str) -> typing.Optional[frozenset[int]]:
    try:
        return cpuset.parse(_read(path), allow_empty=True)
    except (OSError, cpuset.CpusetError):
        return None


class CgroupV1:

    name = state.CgroupMode.V1
    moves_processes = True

    def __init__(self, cpuset_root: str, memory_root: str, group: str,
                 cpus: typing.Optional[frozenset[int]] = None,
                 mems: typing.Optional[frozenset[int]] = None,
                 memory_limit_mib: typing.Optional[int] = None,
                 proc: str = '/proc') -> None:
        self.cpuset_root = cpuset_root
        self.memory_root = memory_root
        self.group = group
        self.path = '/' + group
        self.cpus = cpus
        self.mems = mems
        self.memory_limit_mib = memory_limit_mib
        self.proc = proc
        self.dir = os.path.join(cpuset_root, group)
        self.memory_dir = os.path.join(memory_root, group)

    @classmethod
    def from_settings(cls, s: config.Settings) -> 'CgroupV1':
        return cls(os.path.join(s.cgroup_root, 'cpuset'),
                   os.path.join(s.cgroup_root, 'memory'), s.group_name,
                   s.cpus, s.mems, s.memory_limit_mib, s.paths.proc)

    @classmethod
    def from_record(cls, record: state.V1Record,
                    proc: str = '/proc') -> 'CgroupV1':
        """The backend as recorded in a state file (for undo)."""
        return cls(record['cpuset_root'], record['memory_root'],
                   record['group'], proc=proc)

    # -- the group ------------------------------------------------------

    def record(self) -> state.V1Record:
        """What exists before we change anything (goes in the state)."""
        # None: not ours to decide yet (no memory limit so far); a later
        # apply with a limit fills it in.
        created = {'cpuset': not os.path.isdir(self.dir),
                   'memory': not os.path.isdir(self.memory_dir)
                   if self.memory_limit_mib else None}
        previous: dict[str, str] = {}
        for key in ('cpuset.cpus', 'cpuset.mems'):
            if not created['cpuset']:
                previous[key] = _read(os.path.join(self.dir, key))
        if self.memory_limit_mib and not created['memory']:
            previous['memory.limit_in_bytes'] = _read(
                os.path.join(self.memory_dir, 'memory.limit_in_bytes'))
        return {'cpuset_root': self.cpuset_root,
                'memory_root': self.memory_root, 'group': self.group,
                'created': created, 'previous': previous}

    def ensure(self, deadline: typing.Optional[float] = None) -> None:
        """Create the group(s) with the reserved CPUs (idempotent;
        cgroupfs writes: ``deadline`` is not needed)."""
        try:
            os.makedirs(self.dir, mode=0o755, exist_ok=True)
            mems = (cpuset.format(self.mems) if self.mems else
                    _read(os.path.join(self.cpuset_root, 'cpuset.mems')))
            # mems first: a cpuset with no memory node accepts no task.
            self._set(os.path.join(self.dir, 'cpuset.mems'), mems)
            self._set(os.path.join(self.dir, 'cpuset.cpus'),
                      cpuset.format(self.cpus))
            if self.memory_limit_mib:
                os.makedirs(self.memory_dir, mode=0o755, exist_ok=True)
                self._set(os.path.join(self.memory_dir,
                                       'memory.limit_in_bytes'),
                          str(self.memory_limit_mib * 1024 * 1024))
        except OSError as exc:
            raise BackendError('cannot prepare cgroup %s: %s'
                               % (self.dir, exc)) from None

    @staticmethod
    def _set(path: str, value: str) -> None:
        try:
            if _read(path) == value:
                return  # write only what changes
        except OSError:
            pass
        _write(path, value)

    def members(self, memory: bool = False) -> list[int]:
        """Pids in the host group (cpuset, or the memory group)."""
        d = self.memory_dir if memory else self.dir
        try:
            return [int(x) for x in
                    _read(os.path.join(d, 'cgroup.procs')).split()]
        except (OSError, ValueError):
            return []

    def remove(self, record: state.V1Record) -> list[str]:
        """Remove the groups we created; give back the previous settings
        of groups that existed before. A list of what failed."""
        failed: list[str] = []
        created = record.get('created', {})
        previous = record.get('previous', {})
        for kind, d in (('cpuset', self.dir), ('memory', self.memory_dir)):
            if not os.path.isdir(d):
                continue
            try:
                if created.get(kind):
                    _rmdir(d)
                    continue
                for key, value in sorted(previous.items()):
                    if key.startswith(kind + '.'):
                        _write(os.path.join(d, key), value)
            except OSError as exc:
                LOG.warning('isolation: cannot restore %s: %s', d, exc)
                failed.append('%s: %s' % (d, exc.strerror or exc))
        return failed

    # -- processes ------------------------------------------------------

    def _effective(self, path: str) -> typing.Optional[frozenset[int]]:
        return _read_set(os.path.join(self.cpuset_root, path.lstrip('/'),
                                      'cpuset.effective_cpus'))

    def narrow_affinity(self, pid: int, origin: str) -> dict[str, str]:
        """``{tid: cpus}`` of threads whose affinity is narrower than
        their origin group's CPUs (the move would lose it)."""
        group_cpus = self._effective(origin)
        result: dict[str, str] = {}
        if group_cpus is None:
            return result
        for tid in procfs.threads(pid, self.proc):
            cpus = qemuproc.thread_affinity(pid, tid, self.proc)
            if cpus is not None and cpus != group_cpus:
                result[str(tid)] = cpuset.format(cpus)
        return result

    def _join(self, directory: str, pid: int) -> bool:
        try:
            _write(os.path.join(directory, 'cgroup.procs'), str(pid))
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                LOG.info('isolation: pid %s exited before it moved', pid)
            else:
                LOG.warning('isolation: cannot move pid %s to %s: %s', pid,
                            directory, exc)
            return False
        return True

    def move(self, pid: int, memory: bool = False) -> bool:
        """Move a whole process into the host group (and the memory
        group if ``memory``); False if it is gone or the kernel refused
        (logged)."""
        if not self._join(self.dir, pid):
            return False
        if memory:
            self.move_memory(pid)
        return True

    def move_memory(self, pid: int) -> bool:
        return self._join(self.memory_dir, pid)

    def _dir_or_root(self, root: str, path: typing.Optional[str]) -> str:
        d = os.path.join(root, (path or '/').lstrip('/'))
        if os.path.isdir(d):
            return d
        LOG.info('isolation: cgroup %s is gone; using the root', d)
        return root

    def move_back(self, pid: int, entry: state.Moved) -> bool:
        """Back to the recorded origin (the root if it is gone)."""
        ok = self._join(self._dir_or_root(self.cpuset_root,
                                          entry.get('cpuset')), pid)
        threads = set(procfs.threads(pid, self.proc))
        for tid, text in sorted((entry.get('affinity') or {}).items()):
            if int(tid) not in threads:
                continue  # that thread has ended
            try:
                _set_affinity(int(tid), cpuset.parse(text))
            except (OSError, ValueError) as exc:
                LOG.info('isolation: affinity of thread %s not restored: '
                         '%s', tid, exc)
        return ok

    def move_memory_back(self, pid: int,
                         origin: typing.Optional[str]) -> bool:
        return self._join(self._dir_or_root(self.memory_root, origin), pid)

    def status(self, timeout: typing.Optional[float] = None
               ) -> statusfile.Status:
        """The group as the kernel has it (cgroupfs reads: ``timeout``
        is not needed)."""
        exists = os.path.isdir(self.dir)
        cpus = None
        if exists:
            cpus = _read_set(os.path.join(self.dir, 'cpuset.cpus'))
        return {'group': self.dir, 'group_exists': exists,
                'group_cpus': cpuset.format(cpus) if cpus else None,
                'group_processes': len(self.members()) if exists else 0}
