"""``undo``: put back everything the agent changed.

Driven by the state file, not by the current configuration, so it works
after the agent crashed, after the configuration changed, and even when
``reserved_cpus`` has been removed already.

cgroup v1: every recorded process still in the host group (and still the
same process: same start time) goes back to the cgroup it came from (the
root if that group is gone), with the thread affinities the move reset;
every other process in the group (born inside, or its record lost) goes
where its recorded parent came from, or to the root; then the groups we
created are removed and groups that existed get their old settings back.
A process that someone moved elsewhere meanwhile is left there; one
found in the configured host group instead of the recorded one (the
record's group name changed by hand) goes back to its recorded origin
all the same.

Interrupts, the unbound workqueue mask and irqbalance's banned CPUs get
their recorded originals back (``kernelwork.restore``), whatever the mode.

systemd: every recorded unit gets its previous ``AllowedCPUs=`` (and
``AllowedMemoryNodes=``) back, normally the empty value, after being
widened to every online CPU (systemd does not write an empty set to the
kernel); a unit whose ``EffectiveCPUs`` are not then what was set back
(every online CPU for the empty value) is a failure. A recorded value
that leaves out any of the reserved CPUs apply confined the units to (the
state's ``cpus``) is not set back: the unit gets every CPU, with a
warning (``systemd.Systemd.restore``). Through systemctl, or systemd's
D-Bus API where there is none; with neither, ``undo`` is refused
(``ConfigError``) before any change.

A state file written before the last reboot describes nothing in force
(the reboot undid it): it is removed and nothing else is done.

The status the agent published (``statusfile``) goes with the state
file, whenever that is removed.

The state file is removed only when everything was restored, checked
afterwards in the kernel: no recorded process may still be in the
recorded group or in the configured one (a record whose group name was
changed by hand cannot make undo report success while processes stay
confined). Otherwise it is kept (without the processes already restored)
and the failures are returned, so ``undo`` can be run again. A failure
inside the restore itself is one of those failures, never a crash.

A state file that is corrupt or untrusted is set aside
(``<state_file>.unusable``) and undo falls back to what the
configuration names: the configured group is emptied into the root and
removed; with systemd the configured units get ``AllowedCPUs=`` empty.
"""

import os
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import procfs
from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.isolation import cgroupv1
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import kernelwork
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation import statusfile
from nova_pinning_hooks.isolation import systemd

LOG = logging.getLogger(__name__)


class UndoResult(typing.NamedTuple):
    mode: typing.Optional[str]   # None: nothing was recorded
    restored: int                # processes (or units) put back
    others: int                  # processes found in the group unrecorded
    failures: tuple[str, ...]    # what could not be restored
    earlier_boot: bool = False   # the state was left by an earlier boot


def _undo_v1(record: state.V1Record,
             moved: dict[str, state.Moved], proc: str,
             configured: typing.Optional[str] = None
             ) -> tuple[int, int, list[str]]:
    backend = cgroupv1.CgroupV1.from_record(record, proc)
    # A recorded process in the configured host group goes back too: the
    # recorded group name may have been changed by hand, and the pid and
    # start time still say which process it is and where it came from.
    ours = {backend.path}
    if configured:
        ours.add('/' + configured)
    restored, others = 0, 0
    origins: dict[int, state.Moved] = {}
    for key, entry in sorted(moved.items(), key=lambda kv: int(kv[0])):
        pid = int(key)
        if procfs.same(pid, entry['start'], proc) is None:
            continue  # exited; its pid may be another process's now
        groups = procfs.cgroups(pid, proc) or {}
        origins[pid] = entry
        if groups.get('cpuset') in ours and backend.move_back(pid, entry):
            restored += 1
        if entry.get('memory') and groups.get('memory') in ours:
            backend.move_memory_back(pid, entry['memory'])
    for memory in (False, True):
        for pid in backend.members(memory=memory):
            p = procfs.read(pid, proc)
            parent: state.Moved = origins.get(p.ppid, {}) if p else {}
            if memory:
                backend.move_memory_back(pid, parent.get('memory'))
            else:
                others += backend.move_back(pid, {
                    'cpuset': parent.get('cpuset')})
    failures = backend.remove(record)
    left = backend.members()
    if left:
        failures.append('pids %s stay in %s' % (
            ' '.join(map(str, left)), backend.dir))
    return restored, others, failures


def _undo_systemd(record: state.SystemdRecord, paths: config.HostPaths,
                  reserved: typing.Optional[str] = None
                  ) -> tuple[int, int, list[str]]:
    # systemctl, or systemd's D-Bus API where there is none.
    systemctl, bus = config.systemd_access(paths)
    backend = systemd.Systemd(record.get('slices', []),
                              systemctl=systemctl, system_bus=bus,
                              online=(config.online_cpus(paths),
                                      config.online_nodes(paths)))
    # A set: the state's validation refuses anything else.
    cpus = cpuset.parse(reserved) if reserved else None
    failures = backend.restore(record, cpus)
    return len(record.get('previous', {})) - len(failures), 0, failures


def _fallback(opts: config.Options, paths: config.HostPaths,
              why: typing.Optional[str]) -> UndoResult:
    """Undo without a usable state: what the configuration names."""
    config.check_names(opts)
    mode, _, _ = config.resolve_mode(opts, paths, undo=True)
    failures = [why] if why else []
    if mode == state.CgroupMode.SYSTEMD:
        if not why:
            return UndoResult(None, 0, 0, ())  # never applied here
        units: state.SystemdRecord = {
            'slices': list(opts.slices),
            'previous': {unit: {'AllowedCPUs': ''} for unit in opts.slices}}
        restored, _, failed = _undo_systemd(units, paths)
        return UndoResult(mode, restored, 0, tuple(failures + failed))
    record: state.V1Record = {
        'cpuset_root': os.path.join(opts.cgroup_root, 'cpuset'),
        'memory_root': os.path.join(opts.cgroup_root, 'memory'),
        'group': opts.group_name,
        'created': {'cpuset': True, 'memory': True}}
    backend = cgroupv1.CgroupV1.from_record(record, paths.proc)
    if not (os.path.isdir(backend.dir) or os.path.isdir(backend.memory_dir)):
        return UndoResult(None, 0, 0, tuple(failures))
    _, others, failed = _undo_v1(record, {}, paths.proc)
    return UndoResult(mode, 0, others, tuple(failures + failed))


def _still_confined(st: state.State, proc: str,
                    configured: typing.Optional[str] = None
                    ) -> dict[str, state.Moved]:
    """Recorded processes still in the recorded (or the configured)
    host group."""
    groups = {'/' + st.get('v1', {}).get('group', '')}
    if configured:
        groups.add('/' + configured)
    keep: dict[str, state.Moved] = {}
    for key, entry in st['moved'].items():
        if procfs.same(int(key), entry['start'], proc) is not None and \
                (procfs.cgroups(int(key), proc) or {}).get('cpuset') in groups:
            keep[key] = entry
    return keep


def _restore(st: state.State, paths: config.HostPaths,
             configured: typing.Optional[str] = None
             ) -> tuple[int, int, list[str]]:
    # Interrupts, workqueues and irqbalance first: they never depend on
    # the processes, and a backend failure must not keep them.
    failed = kernelwork.restore(st, paths)
    try:
        if st['mode'] == state.CgroupMode.V1:
            restored, others, failures = _undo_v1(
                st['v1'], st['moved'], paths.proc, configured)
        else:
            restored, others, failures = _undo_systemd(
                st['systemd'], paths, st.get('cpus'))
    except Exception as exc:  # one failure to report, the state kept
        LOG.exception('isolation: undo failed')
        return 0, 0, failed + ['undo failed: %s: %s'
                               % (type(exc).__name__, exc)]
    return restored, others, failed + list(failures)


def undo(options: config.Options,
         paths: config.HostPaths = config.HOST) -> UndoResult:
    """Restore what the state file records; an ``UndoResult``. Raises
    ``state.StateError`` if another agent holds the lock, and
    ``config.ConfigError`` when falling back to the configuration and
    that is unusable too, or when systemd is to be told and neither
    systemctl nor the system bus is there (nothing changed then)."""
    path = options.state_file
    with state.Lock(path):
        result = _undo(options, paths, path)
        if not os.path.lexists(path):
            statusfile.remove(path)  # it would say "applied" for a while
        return result


def _undo(options: config.Options, paths: config.HostPaths,
          path: str) -> UndoResult:
    """``undo`` under the lock."""
    try:
        st = state.load(path)
    except state.StateError as exc:
        aside = path + '.unusable'
        os.replace(path, aside)
        why = '%s (set aside as %s)' % (exc, aside)
        LOG.error('isolation: %s; undoing what the configuration '
                  'names', why)
        return _fallback(options, paths, why)
    if st is None:
        return _fallback(options, paths, None)
    if state.from_earlier_boot(st, paths.proc):
        # The reboot undid it all; acting on its pids and units now
        # would move processes that merely reuse those numbers.
        state.remove(path)
        LOG.info('isolation: %s was written before the last reboot, '
                 'which undid it; removed', path)
        return UndoResult(st['mode'], 0, 0, (), earlier_boot=True)
    if st['mode'] == state.CgroupMode.SYSTEMD:
        # Before any change: without systemctl or the system bus
        # nothing can be undone, and the one line says what to add.
        config.systemd_access(paths)
    restored, others, failures = _restore(
        st, paths, options.group_name)
    if st['mode'] == state.CgroupMode.V1:
        confined = _still_confined(
            st, paths.proc, options.group_name)
        if confined and not failures:
            failures = ['pids %s are still confined'
                        % ' '.join(sorted(confined, key=int))]
        st['moved'] = confined
    if failures:
        state.save(path, st)
    else:
        state.remove(path)
        safefs.remove_stale_temporaries(path)
    LOG.info('isolation: undone (%s): %d restored, %d others, %d '
             'failures', st['mode'], restored, others, len(failures))
    return UndoResult(st['mode'], restored, others, tuple(failures))
