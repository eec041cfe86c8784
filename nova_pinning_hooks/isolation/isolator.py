"""The isolator: confine host processes to the reserved CPUs and
keep them there.

``Isolator(options)`` validates the configuration (``config.load`` of
the ``config.Options`` the command read) before it changes anything.
``apply`` confines once (systemd: ``AllowedCPUs=``
on the host slices; cgroup v1: the host group, then one sweep of /proc
moving every movable process into it). ``watch`` applies, then keeps
things so: cgroup v1 follows daemon restarts through their pid files
(inotify) and sweeps /proc every ``sweep_interval`` seconds for
processes that keep no pid file; systemd re-sets slices whose
``AllowedCPUs=`` drifted. ``restore.undo`` puts everything back.

Invariants:

* nothing is changed unless the whole configuration is valid, and never
  over a state recorded with another setup (mode, group, units): undo
  first;
* every change is recorded in the state file *before* it is made, with
  where each process came from, so ``undo`` works after a crash;
* never lose a process: one that cannot be moved (exited, refused) is
  logged and skipped; moving only narrows the CPUs a process may use, so
  a crash of the agent leaves a working host;
* a pid is acted on only while it belongs to the process that was
  examined (same start time): a reused pid is never moved by mistake;
* one agent at a time (``state.Lock``);
* interrupts, unbound workqueues and irqbalance follow the one-to-one
  CPUs in force (``kernelwork``: ``pinmap``, ``interrupts``, ``workqueue``,
  ``irqbalance``) at apply and at every sweep; a failure there is one log
  line and never stops the confinement of processes;
* the watch loops log any failure of a sweep (the backend's, systemd's
  answers, a bug) and go on: only ``stop`` ends them;
* the status is published after apply and after every sweep
  (``statusfile``): the metrics and nova-compute read it instead of
  asking systemd;
* ``watch`` checks the reserved CPUs against nova's CPU sets again at
  every sweep (``config.check_guest_overlap``: the overcommit file read
  anew): while they overlap, or nova's sets cannot be known (the file
  set aside as stale, unusable), it confines nothing more (``paused``,
  one error line when that starts, one line when it ends, published in
  the status); what is confined stays, as when the agent stops.
"""

import threading
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import procfs
from nova_pinning_hooks.isolation import BackendError
from nova_pinning_hooks.isolation import backends
from nova_pinning_hooks.isolation import cgroupv1
from nova_pinning_hooks.isolation import classify
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import kernelwork
from nova_pinning_hooks.isolation import pidwatch
from nova_pinning_hooks.isolation import report
from nova_pinning_hooks.isolation import restore
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation import statusfile

LOG = logging.getLogger(__name__)
WAIT = 0.5  # seconds the watch loop waits for pid-file events at a time
# Seconds one ensure() (a check of the units, and their repair) may ask
# systemd in all: one systemctl's own bound.
ENSURE_TIMEOUT = 60.0


class _NoWatcher:
    """Stands in for the pid-file watcher when inotify is unavailable."""

    def __init__(self) -> None:
        self._sleep = threading.Event()

    def wait(self, timeout: float) -> list[procfs.Proc]:
        self._sleep.wait(timeout)
        return []

    def rescan(self) -> list[procfs.Proc]:
        return []

    def close(self) -> None:
        pass


def _fill(old: typing.Mapping[str, object],
          fresh: typing.Mapping[str, object]) -> None:
    """Complete a recorded backend state with what it lacks (new
    options since the first apply); what was recorded first wins."""
    into = typing.cast(dict[str, object], old)  # a record: JSON's dict
    for key, value in fresh.items():
        now = into.get(key)
        if isinstance(value, dict) and isinstance(now, dict):
            _fill(now, value)
        elif now is None:
            into[key] = value


def _same_setup(recorded: state.State,
                settings: config.Settings) -> None:
    """Refuse to apply over a state recorded with another setup."""
    mode, modes = recorded['mode'], state.CgroupMode
    then = now = None
    if mode != settings.mode:
        then, now = 'cgroup_mode ' + mode, settings.mode
    elif mode == modes.V1 and \
            recorded['v1'].get('group') != settings.group_name:
        then, now = 'group_name %s' % recorded['v1'].get('group'), \
            settings.group_name
    elif mode == modes.SYSTEMD and sorted(
            recorded['systemd'].get('slices', [])) != sorted(settings.slices):
        then, now = 'slices ' + ','.join(
            recorded['systemd'].get('slices', [])), ','.join(settings.slices)
    if then:
        raise config.ConfigError(
            'isolation was applied with %s (state file %s), now %s: run '
            '"nova-pinning-isolate undo" first' % (then, settings.state_file,
                                                   now))


class Isolator:

    def __init__(self, options: config.Options,
                 paths: config.HostPaths = config.HOST) -> None:
        self.options, self.paths = options, paths
        self.settings = config.load(options, paths)
        self.backend: backends.Backend = backends.backend_for(self.settings)
        self.proc = paths.proc
        self.state: typing.Optional[state.State] = None
        self.lock = state.Lock(self.settings.state_file)
        # Why ``watch`` confines nothing more now (nova's CPU sets), or
        # None while it may.
        self.paused: typing.Optional[str] = None

    # -- apply ------------------------------------------------------------

    def apply(self) -> int:
        """Confine now; the number of processes moved."""
        with self.lock:
            return self._apply()

    def _apply(self) -> int:
        s = self.settings
        st = state.load(s.state_file)
        fresh = self.backend.record()
        if st is not None and state.from_earlier_boot(st, self.proc):
            LOG.info('isolation: %s was written before the last reboot, '
                     'which undid it; starting afresh', s.state_file)
            st = None
        if st is None:
            st = {'version': state.VERSION, 'mode': s.mode, 'moved': {}}
        else:
            _same_setup(st, s)
        _fill(st.setdefault('v1', {}) if s.mode == state.CgroupMode.V1
              else st.setdefault('systemd', {}), fresh)
        st['cpus'] = cpuset.format(s.cpus)
        st['boot_id'] = state.boot_id(self.proc)
        state.save(s.state_file, st)  # before the first change
        self.state = st
        self.backend.ensure(self._ensure_deadline())
        moved = self.sweep() if self.backend.moves_processes else 0
        self.follow_pins()
        self.publish()
        LOG.info('isolation: host processes confined to CPUs %s (%s); '
                 '%d moved', st['cpus'], s.mode, moved)
        return moved

    def undo(self) -> restore.UndoResult:
        """``restore.undo`` (from the state file); an UndoResult."""
        return restore.undo(self.options, self.paths)

    def follow_pins(self) -> None:
        """Interrupts, workqueues and irqbalance off the one-to-one CPUs
        now in force (``kernelwork.follow``); never raises."""
        kernelwork.follow(self.settings, self.state)

    def publish(self) -> None:
        """Publish the status that the metrics and nova-compute read
        instead of asking systemd (``statusfile``); never raises."""
        try:
            status = report.agent_status(self.options, self.settings,
                                         self.backend)
            if self.paused is not None:
                status['paused'] = self.paused
            statusfile.write(self.settings.state_file, status,
                             self.settings.sweep_interval, self.proc)
        except Exception as exc:
            LOG.error('isolation: cannot publish the status: %s: %s',
                      type(exc).__name__, exc)

    def may_confine(self) -> bool:
        """At a sweep of ``watch``: whether the reserved CPUs are still
        clear of nova's CPU sets, read again from the overcommit file
        (nova-compute may have been restarted with other sets, or have
        set its file aside as stale). Sets ``paused``; one error line
        when confining stops, one when it may go on again."""
        try:
            config.check_guest_overlap(self.options.overcommit_file,
                                       self.settings.cpus)
        except config.ConfigError as exc:
            if self.paused != str(exc):
                LOG.error('isolation: %s; confining nothing more until '
                          'that is resolved (what is confined stays '
                          'confined; "undo" releases it)', exc)
            self.paused = str(exc)
            return False
        if self.paused is not None:
            LOG.info('isolation: reserved_cpus %s are clear of nova\'s '
                     'CPU sets again: confining again',
                     cpuset.format(self.settings.cpus))
            self.paused = None
        return True

    # -- moving processes (cgroup v1) ----------------------------------------

    @property
    def _mover(self) -> cgroupv1.CgroupV1:
        """The backend, as the one that moves processes: what follows
        runs only where it does (``moves_processes``: cgroup v1)."""
        backend = self.backend
        if not isinstance(backend, cgroupv1.CgroupV1):
            raise BackendError('the %s backend moves no process'
                               % backend.name)
        return backend

    def _memory_movable(self, groups: typing.Mapping[str, str]) -> bool:
        """Whether the process joins the memory group too: only with a
        limit, and only out of the same groups as for cpuset (a memory
        group of a container or service manager is left alone)."""
        return bool(self.settings.memory_limit_mib) and \
            groups.get('memory') in self.settings.rules.move_from

    def _entry(self, p: procfs.Proc,
               groups: typing.Mapping[str, str]) -> state.Moved:
        entry: state.Moved = {'comm': p.comm, 'start': p.start,
                              'cpuset': groups['cpuset']}
        if self._memory_movable(groups):
            entry['memory'] = groups['memory']
        affinity = self._mover.narrow_affinity(p.pid, groups['cpuset'])
        if affinity:
            entry['affinity'] = affinity
        return entry

    def _move(self, items: list[tuple[procfs.Proc, dict[str, str]]]
              ) -> int:
        """Move ``[(proc, cgroups)]``, recording each first."""
        assert self.state is not None  # sweep and confine follow _apply
        moved_st = self.state['moved']
        added = []
        for p, groups in items:
            key = str(p.pid)
            known = moved_st.get(key)
            if known is None or known['start'] != p.start:
                moved_st[key] = self._entry(p, groups)
                added.append(key)
            # else: moved out again by someone; its first origin stands
        state.save(self.settings.state_file, self.state)
        moved, dropped = 0, False
        for p, groups in items:
            # The scan is a while ago on a busy host: same process still?
            if procfs.same(p.pid, p.start, self.proc) is not None and \
                    self._mover.move(p.pid, self._memory_movable(groups)):
                moved += 1
                LOG.debug('isolation: moved %d (%s)', p.pid, p.comm)
            elif str(p.pid) in added:
                del moved_st[str(p.pid)]
                dropped = True
        if dropped:
            state.save(self.settings.state_file, self.state)
        return moved

    def _prune(self) -> bool:
        """Forget processes that have exited (their pid may be reused)."""
        assert self.state is not None  # sweep follows _apply
        moved_st = self.state['moved']
        gone = [key for key, entry in moved_st.items()
                if procfs.same(int(key), entry['start'], self.proc) is None]
        for key in gone:
            del moved_st[key]
        return bool(gone)

    def _join_memory(self, items: list[tuple[procfs.Proc, dict[str, str]]]
                     ) -> None:
        """Processes confined before a memory limit was configured
        join the memory group too (origin recorded first)."""
        assert self.state is not None  # sweep follows _apply
        moved_st = self.state['moved']
        for p, groups in items:
            entry = moved_st.get(str(p.pid))
            if entry is not None and entry['start'] == p.start and \
                    entry.get('memory') is None:
                entry['memory'] = groups.get('memory')
        state.save(self.settings.state_file, self.state)
        for p, _ in items:
            if procfs.same(p.pid, p.start, self.proc) is not None:
                self._mover.move_memory(p.pid)

    def sweep(self) -> int:
        """Move every movable process now; how many moved."""
        assert self.state is not None  # sweep follows _apply
        items: list[tuple[procfs.Proc, dict[str, str]]] = []
        memory: list[tuple[procfs.Proc, dict[str, str]]] = []
        group = self.settings.rules.group
        for p, v, groups in classify.scan(self.settings.rules, self.proc):
            if v == classify.MOVABLE:
                items.append((p, groups))
            elif v == classify.CONFINED and groups.get('memory') != group \
                    and self._memory_movable(groups):
                memory.append((p, groups))
        if memory:
            self._join_memory(memory)
        if self._prune() and not items:
            state.save(self.settings.state_file, self.state)
        return self._move(items) if items else 0

    def confine(self, p: procfs.Proc) -> bool:
        """Move one process reported by the pid-file watcher, if it is
        still that process and may be moved; True if moved."""
        now = procfs.same(p.pid, p.start, self.proc)
        if now is None:
            return False
        v, groups = classify.verdict(now, self.settings.rules, self.proc)
        if v != classify.MOVABLE:
            LOG.debug('isolation: leaving %d (%s): %s', p.pid, p.comm, v)
            return False
        assert groups is not None  # MOVABLE: its cgroups were read
        return self._move([(now, groups)]) == 1

    # -- watch ----------------------------------------------------------

    def watch(self, stop: typing.Optional[threading.Event] = None,
              max_seconds: typing.Optional[float] = None) -> None:
        """Apply, then keep host processes confined until ``stop`` is
        set (or ``max_seconds`` passed). Never undoes on exit."""
        stop = stop or threading.Event()
        deadline = None if max_seconds is None else \
            time.monotonic() + max_seconds
        with self.lock:
            if not self.backend.moves_processes:
                self._apply()
                self._keep_units(stop, deadline)
                return
            # Watch first, then sweep: a daemon that writes its pid file
            # while the sweep runs is either swept or seen by the
            # watcher, never missed until the next sweep.
            watcher = self._watcher()
            try:
                self._apply()
                for p in watcher.rescan():
                    self.confine(p)
                self._follow(watcher, stop, deadline)
            finally:
                watcher.close()

    def _keep_units(self, stop: threading.Event,
                    deadline: typing.Optional[float]) -> None:
        while not stop.wait(self._until(deadline,
                                        self.settings.sweep_interval)):
            if deadline is not None and time.monotonic() >= deadline:
                return
            try:
                if self.may_confine():
                    self.backend.ensure(self._ensure_deadline())
            except BackendError as exc:
                LOG.error('isolation: %s', exc)
            except Exception:
                # Whatever went wrong (the backend's answer, a bug), the
                # units stay as they are: keep watching them.
                LOG.exception('isolation: the check of the units failed; '
                              'trying again in %d s',
                              self.settings.sweep_interval)
            self.follow_pins()
            self.publish()

    @staticmethod
    def _ensure_deadline() -> float:
        """When one ``ensure`` must have ended: every question it asks
        systemd keeps its own bound too (issue 48, R5-M1: a sweep of
        ``watch`` asked without a deadline)."""
        return time.monotonic() + ENSURE_TIMEOUT

    @staticmethod
    def _until(deadline: typing.Optional[float], seconds: float) -> float:
        if deadline is None:
            return seconds
        return max(0.0, min(seconds, deadline - time.monotonic()))

    def _watcher(self) -> typing.Union[pidwatch.PidWatcher, _NoWatcher]:
        try:
            watcher = pidwatch.PidWatcher(self.settings.pidfile_dirs,
                                          self.proc)
        except OSError as exc:
            # Out of inotify instances or watches: degrade, do not die.
            LOG.error('isolation: cannot watch pid files (%s); only the '
                      'sweep every %d s follows daemon restarts', exc,
                      self.settings.sweep_interval)
            return _NoWatcher()
        return watcher

    def _follow(self, watcher: typing.Union[pidwatch.PidWatcher, _NoWatcher],
                stop: threading.Event,
                deadline: typing.Optional[float]) -> None:
        s = self.settings
        next_sweep = time.monotonic() + s.sweep_interval
        while not stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                return
            try:
                for p in watcher.wait(self._until(deadline, WAIT)):
                    if self.paused is None and self.confine(p):
                        LOG.info('isolation: followed %s (pid %d) into '
                                 'the host group', p.comm, p.pid)
                if time.monotonic() >= next_sweep:
                    if self.may_confine():
                        # recreated if removed
                        self.backend.ensure(self._ensure_deadline())
                        moved = self.sweep()
                        if moved:
                            LOG.info('isolation: sweep moved %d processes',
                                     moved)
                    self.follow_pins()
                    self.publish()
                    next_sweep = time.monotonic() + s.sweep_interval
            except (OSError, BackendError) as exc:
                # Keep running: the host stays as it is meanwhile.
                LOG.error('isolation: %s; retrying', exc)
                stop.wait(1.0)
            except Exception:
                LOG.exception('isolation: the sweep failed; retrying')
                stop.wait(1.0)
