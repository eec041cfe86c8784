"""Where host processes are confined: a cgroup v1 cpuset group, or
systemd slices' ``AllowedCPUs=`` (cgroup v2). Same small interface:
``prepare()``, ``move(pid)`` (v1 only), ``undo(state)``, ``status()``.

Every write names exactly one file or one unit; nothing is built into a
shell string (systemctl runs with an argument list).
"""

import os
import subprocess

from oslo_log import log as logging

from nova_pinning_hooks import cpuset

LOG = logging.getLogger(__name__)


class BackendError(Exception):
    """The cgroup tree or systemd refused a change."""


def _write(path, value):
    with open(path, 'w', encoding='ascii') as f:
        f.write(value)


def _rmdir(path):
    # cgroupfs removes a group's control files with the group itself.
    os.rmdir(path)


def _read(path):
    with open(path, encoding='ascii') as f:
        return f.read().strip()


class CgroupV1:
    """A cpuset group (and optionally a memory group) for host processes."""

    name = 'v1'

    def __init__(self, root, group, cpus, memory_limit_mib=None):
        self.cpuset_root = os.path.join(root, 'cpuset')
        self.memory_root = os.path.join(root, 'memory')
        self.group = group
        self.cpus = cpus
        self.memory_limit_mib = memory_limit_mib
        self.dir = os.path.join(self.cpuset_root, group)

    def available(self):
        return os.path.exists(os.path.join(self.cpuset_root, 'cpuset.cpus'))

    def prepare(self):
        """Create the group with the reserved CPUs (idempotent)."""
        try:
            os.makedirs(self.dir, mode=0o755, exist_ok=True)
            # A new cpuset group starts empty: mems first, or no task may
            # join it.
            _write(os.path.join(self.dir, 'cpuset.mems'),
                   _read(os.path.join(self.cpuset_root, 'cpuset.mems')))
            _write(os.path.join(self.dir, 'cpuset.cpus'),
                   cpuset.format(self.cpus))
            if self.memory_limit_mib:
                mem = os.path.join(self.memory_root, self.group)
                os.makedirs(mem, mode=0o755, exist_ok=True)
                _write(os.path.join(mem, 'memory.limit_in_bytes'),
                       str(self.memory_limit_mib * 1024 * 1024))
        except OSError as exc:
            raise BackendError('cannot prepare cpuset group %s: %s'
                               % (self.dir, exc)) from None

    def move(self, pid, to=None):
        """Move a whole process (all threads); False if it is gone."""
        target = self.dir if to is None else os.path.join(
            self.cpuset_root, to.lstrip('/'))
        try:
            _write(os.path.join(target, 'cgroup.procs'), str(pid))
            if self.memory_limit_mib and to is None:
                _write(os.path.join(self.memory_root, self.group,
                                    'cgroup.procs'), str(pid))
        except ProcessLookupError:
            return False
        except OSError as exc:
            LOG.warning('isolation: cannot move pid %s to %s: %s', pid,
                        target, exc)
            return False
        return True

    def members(self):
        try:
            return [int(x) for x in
                    _read(os.path.join(self.dir, 'cgroup.procs')).split()]
        except OSError:
            return []

    def undo(self, state):
        """Move every recorded process back where it was, the rest of the
        group to the root, and remove the groups."""
        for pid, info in sorted(state.get('moved', {}).items()):
            self.move(int(pid), to=info.get('from') or '/')
        for pid in self.members():  # born inside, or its origin is gone
            self.move(pid, to='/')
        mem = os.path.join(self.memory_root, self.group)
        if os.path.isdir(mem):
            # The memory group's origin is not recorded: back to the root.
            for pid in _read(os.path.join(mem, 'cgroup.procs')).split():
                try:
                    _write(os.path.join(self.memory_root, 'cgroup.procs'),
                           pid)
                except OSError as exc:
                    LOG.warning('isolation: pid %s stays in %s: %s', pid,
                                mem, exc)
        for path in (self.dir, mem):
            if os.path.isdir(path):
                try:
                    _rmdir(path)
                except OSError as exc:
                    LOG.warning('isolation: cannot remove %s: %s', path,
                                exc)

    def status(self):
        exists = os.path.isdir(self.dir)
        return {'group': self.dir, 'exists': exists,
                'cpus': _read(os.path.join(self.dir, 'cpuset.cpus'))
                if exists else None,
                'processes': len(self.members())}


class Systemd:
    """``AllowedCPUs=`` on slices, as runtime properties (reversible)."""

    name = 'systemd'

    def __init__(self, cpus, slices, systemctl='systemctl'):
        self.cpus = cpus
        self.slices = list(slices)
        self.systemctl = systemctl
        if 'machine.slice' in self.slices:
            raise BackendError('machine.slice holds the guests: it must not '
                               'be confined to the host CPUs')

    def _run(self, *args):
        try:
            proc = subprocess.run([self.systemctl] + list(args),
                                  capture_output=True, text=True,
                                  timeout=60, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BackendError('systemctl failed: %s' % exc) from None
        if proc.returncode:
            raise BackendError('systemctl %s: %s' % (
                ' '.join(args), proc.stderr.strip() or proc.returncode))
        return proc.stdout

    def available(self):
        return os.path.isdir('/run/systemd/system')

    def prepare(self):
        for unit in self.slices:
            self._run('set-property', '--runtime', unit,
                      'AllowedCPUs=%s' % cpuset.format(self.cpus))

    def move(self, pid, to=None):
        return True  # systemd keeps new processes in their slices

    def undo(self, state):
        for unit in self.slices:
            self._run('set-property', '--runtime', unit, 'AllowedCPUs=')

    def status(self):
        result = {}
        for unit in self.slices + ['machine.slice']:
            out = self._run('show', '-p', 'AllowedCPUs', '-p',
                            'EffectiveCPUs', unit)
            props = dict(line.split('=', 1) for line in out.splitlines()
                         if '=' in line)
            result[unit] = props
        return {'slices': result}
