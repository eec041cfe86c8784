"""The isolation agent: confine host processes to the reserved CPUs.

``Isolator(conf)`` validates the configuration before it changes anything,
then ``apply`` confines (systemd: ``AllowedCPUs=`` on the host slices;
cgroup v1: one sweep moving every movable process into the host cpuset
group), ``watch`` keeps them there as daemons restart (pid files through
inotify, plus a periodic sweep for processes with no pid file), ``undo``
puts everything back and ``status`` reports.

Invariants:

* nothing is changed unless the whole configuration is valid;
* never lose a process: one that cannot be moved (exited, kernel thread,
  refused) is logged and skipped; moving only changes which CPUs it may
  use, so a crash of the agent leaves a working host;
* every move is recorded in the state file (atomically) with where the
  process came from, so ``undo`` restores it, even after a crash;
* guests (machine cgroups) and excluded processes are never touched.
"""

import os
import time

from oslo_log import log as logging

from nova_pinning_hooks import cpuset
from nova_pinning_hooks.isolation import backends
from nova_pinning_hooks.isolation import pidwatch
from nova_pinning_hooks.isolation import procfs
from nova_pinning_hooks import statefile

LOG = logging.getLogger(__name__)


class ConfigError(Exception):
    """The configuration is refused; nothing was changed."""


def online_cpus(sysfs='/sys/devices/system/cpu'):
    with open(os.path.join(sysfs, 'online'), encoding='ascii') as f:
        return cpuset.parse(f.read().strip())


def _guest_sets(conf):
    """nova's CPU sets for guests, from the overcommit file if present."""
    from nova_pinning_hooks import overcommit
    try:
        info = overcommit.read(conf.nova_pinning.overcommit_file)
    except overcommit.OvercommitError:
        return {}
    return {k: cpuset.parse(v) for k, v in
            (('cpu_shared_set', info.shared_cpus),
             ('cpu_dedicated_set', info.dedicated_cpus)) if v}


class Isolator:

    def __init__(self, conf, proc='/proc', sysfs='/sys/devices/system/cpu',
                 systemctl='systemctl'):
        self.conf = conf
        self.opts = conf.nova_pinning_isolation
        self.proc = proc
        self.cpus = self._validate(sysfs)
        self.excluded = frozenset(self.opts.exclude_process_names)
        self.backend = self._backend(systemctl)

    def _validate(self, sysfs):
        text = self.conf.nova_pinning.reserved_cpus
        if not text or not text.strip():
            raise ConfigError('[nova_pinning] reserved_cpus is not set: '
                              'there are no host CPUs to confine host '
                              'processes to')
        try:
            cpus = cpuset.parse_optional(text, '[nova_pinning] '
                                         'reserved_cpus',
                                         known=online_cpus(sysfs))
        except cpuset.CpusetError as exc:
            raise ConfigError(str(exc)) from None
        except OSError as exc:
            raise ConfigError('cannot read the online CPUs: %s'
                              % exc) from None
        for name, guest_cpus in _guest_sets(self.conf).items():
            if cpus & guest_cpus:
                raise ConfigError(
                    '[nova_pinning] reserved_cpus %s overlaps nova\'s %s '
                    '(%s): host processes would share CPUs with guests'
                    % (cpuset.format(cpus), name,
                       cpuset.format(guest_cpus)))
        return cpus

    def _backend(self, systemctl):
        mode = self.opts.cgroup_mode
        root = self.opts.cgroup_root
        if mode == 'auto':
            unified = os.path.exists(os.path.join(root, 'cgroup.controllers'))
            mode = ('systemd' if unified and
                    os.path.isdir('/run/systemd/system') else 'v1')
        try:
            if mode == 'systemd':
                return backends.Systemd(self.cpus, self.opts.slices,
                                        systemctl)
            backend = backends.CgroupV1(root, self.opts.group_name,
                                        self.cpus,
                                        self.opts.memory_limit_mib)
        except backends.BackendError as exc:
            raise ConfigError(str(exc)) from None
        if not backend.available():
            raise ConfigError('no cgroup v1 cpuset hierarchy at %s'
                              % backend.cpuset_root)
        return backend

    # -- state ----------------------------------------------------------

    def load_state(self):
        import json
        try:
            with open(self.opts.state_file, encoding='utf-8') as f:
                return json.load(f)
        except (OSError, ValueError):
            return {'moved': {}}

    def save_state(self, state):
        state.update(mode=self.backend.name, cpus=cpuset.format(self.cpus))
        statefile.write_json(self.opts.state_file, state, mode=0o600)

    # -- confining --------------------------------------------------------

    def candidates(self):
        """Pids the sweep considers."""
        only = self.opts.only_descendants_of
        if only:
            return sorted(procfs.descendants(only, self.proc))
        return procfs.pids(self.proc)

    def confine(self, pid, state):
        """Move one process if it may be moved; True if moved now."""
        p = procfs.read(pid, self.proc)
        if p is None:
            return False
        path = procfs.cgroup_of(pid, 'cpuset', self.proc)
        if path is None:
            return False
        why = procfs.why_not_movable(p, self.excluded, path)
        if why:
            LOG.debug('isolation: leaving %s (%s): %s', pid, p.comm, why)
            return False
        group = '/' + self.opts.group_name
        if path == group:
            return False
        if path not in self.opts.move_from_groups:
            LOG.debug('isolation: leaving %s (%s) in %s, not ours', pid,
                      p.comm, path)
            return False
        if not self.backend.move(pid):
            LOG.info('isolation: %s (%s) not moved (gone or refused)', pid,
                     p.comm)
            return False
        state['moved'].setdefault(str(pid), {'from': path, 'comm': p.comm,
                                             'start': p.start})
        return True

    def apply(self):
        """Confine now; returns how many processes were moved."""
        self.backend.prepare()
        state = self.load_state()
        state.setdefault('moved', {})
        moved = 0
        if isinstance(self.backend, backends.CgroupV1):
            moved = self.sweep(state)
        self.save_state(state)
        LOG.info('isolation: host processes confined to CPUs %s (%s); %d '
                 'moved', cpuset.format(self.cpus), self.backend.name,
                 moved)
        return moved

    def sweep(self, state):
        moved = sum(1 for pid in self.candidates()
                    if self.confine(pid, state))
        self.save_state(state)
        return moved

    def watch(self, stop=None, max_seconds=None):
        """Apply, then follow restarts until ``stop`` is set."""
        self.apply()
        if not isinstance(self.backend, backends.CgroupV1):
            LOG.info('isolation: systemd keeps slices confined; nothing '
                     'to watch')
            if stop is not None:
                stop.wait(max_seconds)  # stay up as the service
            return
        watcher = pidwatch.PidWatcher(self.opts.pidfile_dirs, self.proc)
        state = self.load_state()
        deadline = None if max_seconds is None else \
            time.monotonic() + max_seconds
        next_sweep = time.monotonic() + self.opts.sweep_interval
        try:
            while not (stop is not None and stop.is_set()):
                if deadline is not None and time.monotonic() > deadline:
                    break
                for pid in watcher.wait(0.5):
                    if self.confine(pid, state):
                        LOG.info('isolation: followed restarted pid %s',
                                 pid)
                        self.save_state(state)
                if time.monotonic() >= next_sweep:
                    self.sweep(state)
                    next_sweep = time.monotonic() + self.opts.sweep_interval
        finally:
            watcher.close()

    def undo(self):
        state = self.load_state()
        # A recorded pid now held by another process (the original exited
        # and the pid was reused) is not moved by that record.
        same = {}
        for pid, info in state.get('moved', {}).items():
            p = procfs.read(int(pid), self.proc)
            if p is not None and p.start == info.get('start'):
                same[pid] = info
        state['moved'] = same
        self.backend.undo(state)
        try:
            os.unlink(self.opts.state_file)
        except FileNotFoundError:
            pass
        LOG.info('isolation: undone; %d processes moved back',
                 len(state.get('moved', {})))

    def status(self):
        result = {'mode': self.backend.name,
                  'reserved_cpus': cpuset.format(self.cpus)}
        result.update(self.backend.status())
        return result
