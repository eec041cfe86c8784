"""systemd backend (cgroup v2): ``AllowedCPUs=`` on the host's slices.

``systemctl set-property --runtime <unit> AllowedCPUs=<reserved>`` on
``system.slice``, ``user.slice`` and ``init.scope`` (configurable; never
``machine.slice``, where libvirt puts the guests). Runtime properties
vanish at reboot, and systemd keeps every new process of a slice inside
it, so there are no processes to follow: ``moves_processes`` is False.

Same small interface as ``cgroupv1.CgroupV1``: ``record()`` reads the
units' current values (stored before the first change), ``ensure()``
sets ours (only on units that differ), ``restore(record)`` sets the
recorded values back (normally empty: ``AllowedCPUs=``), ``status()``.

An empty ``AllowedCPUs=`` does not give a unit its CPUs back: systemd
(252, Debian 12) then leaves the cgroup's ``cpuset.cpus`` as it was, so
the unit's processes stayed on the reserved CPUs after an undo that
reported success (seen on the 2-node VM, tests/vm). ``restore`` widens
every unit to every online CPU (and memory node) first, then sets the
recorded value, and checks ``EffectiveCPUs`` afterwards (the recorded
CPUs, every online CPU for an empty value, or empty when systemd switched
the unit's cpuset off): a unit left narrower is a failure, never a
success.

A recorded value is not taken blindly: a non-empty ``AllowedCPUs`` that
leaves out any of the reserved CPUs that apply confined the unit to
(``restore(record, reserved)``) is not restored: the unit is given every
CPU instead, with a warning naming the value. Before the D-Bus replies
were checked (issue 40, H-1) another local user could make ``apply``
record such a value (``AllowedCPUs=1``, a guests' CPU), which ``undo``
then set, leaving every host daemon on the guests' CPU while it reported
success; an operator who confined a unit by hand before ``apply`` did so
around the host's CPUs, which the reserved ones are.

systemd is reached through ``Systemctl`` (the command, on PATH) or,
where there is none (kolla's images), ``systemdbus.Manager`` (its D-Bus
API on the system bus): the same two requests, ``show`` and
``set_runtime``, with the same values, so the units, the undo and the
state file are the same either way. systemctl always runs with an
argument list, never through a shell.
"""

import subprocess
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.isolation import BackendError
from nova_pinning_hooks.isolation import BackendUnreachable
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation import statusfile
from nova_pinning_hooks.isolation import systemdbus

LOG = logging.getLogger(__name__)

GUESTS = 'machine.slice'
TIMEOUT = 60  # seconds one systemctl may run, and one ensure() in all


def _props(text: str) -> dict[str, str]:
    return dict(line.split('=', 1) for line in text.splitlines()
                if '=' in line)


class Systemctl:
    """systemd through its command-line client."""

    def __init__(self, path: str = 'systemctl') -> None:
        self.path = path

    def __str__(self) -> str:
        return self.path

    def _run(self, *args: str,
             deadline: typing.Optional[float] = None) -> str:
        argv = [self.path] + list(args)
        timeout = float(TIMEOUT)
        if deadline is not None:
            timeout = min(timeout, deadline - time.monotonic())
            if timeout <= 0:
                raise BackendUnreachable('%s: not run: no time left'
                                         % ' '.join(argv))
        try:
            proc = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise BackendUnreachable('%s did not end within %g s'
                                     % (' '.join(argv), timeout)) from None
        except (OSError, subprocess.SubprocessError) as exc:
            raise BackendError('%s failed: %s' % (' '.join(argv), exc)) \
                from None
        if proc.returncode:
            raise BackendError('%s: %s' % (' '.join(argv),
                                           proc.stderr.strip() or
                                           'exit status %d'
                                           % proc.returncode))
        return proc.stdout

    def show(self, unit: str, deadline: typing.Optional[float] = None
             ) -> dict[str, str]:
        """The unit's CPU properties, as systemd reports them."""
        return _props(self._run('show', '-p', 'AllowedCPUs', '-p',
                                'EffectiveCPUs', '-p', 'AllowedMemoryNodes',
                                unit, deadline=deadline))

    def set_runtime(self, unit: str, props: typing.Mapping[str, str],
                    deadline: typing.Optional[float] = None) -> None:
        self._run('set-property', '--runtime', unit,
                  *['%s=%s' % kv for kv in sorted(props.items())],
                  deadline=deadline)


def manager(systemctl: typing.Optional[str] = None,
            system_bus: typing.Optional[systemdbus.Sockets] = None
            ) -> typing.Union[Systemctl, systemdbus.Manager]:
    """How systemd is reached: its command when there is one, otherwise
    its D-Bus API, on its own socket or else the system bus
    (``system_bus``)."""
    if systemctl or not system_bus:
        return Systemctl(systemctl or 'systemctl')
    return systemdbus.Manager(systemdbus.Bus(
        system_bus.bus, private=system_bus.private))


class Systemd:

    name = state.CgroupMode.SYSTEMD
    moves_processes = False

    def __init__(self, slices: typing.Iterable[str],
                 cpus: typing.Optional[frozenset[int]] = None,
                 mems: typing.Optional[frozenset[int]] = None,
                 systemctl: typing.Optional[str] = 'systemctl',
                 online: typing.Optional[
                     tuple[frozenset[int], frozenset[int]]] = None,
                 system_bus: typing.Optional[systemdbus.Sockets] = None
                 ) -> None:
        self.slices = list(slices)
        self.cpus = cpus
        self.mems = mems
        self.systemd = manager(systemctl, system_bus)
        # (online CPUs, online memory nodes): what an unconfined unit
        # gets; needed by restore() only.
        self.online = online

    @classmethod
    def from_settings(cls, s: config.Settings) -> 'Systemd':
        return cls(s.slices, s.cpus, s.mems, s.systemctl,
                   system_bus=s.system_bus)

    def show(self, unit: str, deadline: typing.Optional[float] = None
             ) -> dict[str, str]:
        """The unit's CPU properties, as systemd reports them (asked no
        later than ``deadline``, a ``time.monotonic()`` time)."""
        return self.systemd.show(unit, deadline)

    def _wanted(self) -> dict[str, str]:
        props = {'AllowedCPUs': cpuset.format(self.cpus)}
        if self.mems:
            props['AllowedMemoryNodes'] = cpuset.format(self.mems)
        return props

    def record(self) -> state.SystemdRecord:
        previous: dict[str, dict[str, str]] = {}
        for unit in self.slices:
            now = self.show(unit)
            previous[unit] = {key: now.get(key, '')
                              for key in self._wanted()}
        return {'slices': list(self.slices), 'previous': previous}

    def _set(self, unit: str, props: typing.Mapping[str, str],
             deadline: typing.Optional[float] = None) -> None:
        self.systemd.set_runtime(unit, props, deadline)

    def drifted(self, deadline: typing.Optional[float] = None
                ) -> list[str]:
        """Units whose properties are not (or no longer) ours."""
        wanted = self._wanted()
        return [unit for unit in self.slices
                if any(_canonical(self.show(unit, deadline).get(k, '')) != v
                       for k, v in wanted.items())]

    def ensure(self, deadline: typing.Optional[float] = None) -> None:
        """Set ours on every unit that drifted, asking systemd nothing
        after ``deadline`` (``time.monotonic()``; issue 48: a sweep of
        ``watch`` ends)."""
        for unit in self.drifted(deadline):
            self._set(unit, self._wanted(), deadline)
            effective = _canonical(self.show(unit, deadline).get(
                'EffectiveCPUs', ''))
            if effective != cpuset.format(self.cpus):
                # systemd took the property but the kernel did not apply
                # it (no cpuset controller where systemd looks).
                raise BackendError(
                    '%s: systemd accepted AllowedCPUs=%s but its '
                    'EffectiveCPUs are %r: not confined' % (
                        unit, cpuset.format(self.cpus), effective))
            LOG.info('isolation: %s confined to CPUs %s', unit,
                     cpuset.format(self.cpus))

    def restore(self, record: state.SystemdRecord,
                reserved: typing.Optional[frozenset[int]] = None
                ) -> list[str]:
        """Give every recorded unit its previous values back; a list of
        what failed. ``reserved``: the CPUs apply confined the units to
        (the state's ``cpus``), against which a recorded value is
        checked."""
        failed: list[str] = []
        for unit, props in sorted(record.get('previous', {}).items()):
            try:
                self._restore_unit(unit, props, reserved)
            except BackendError as exc:
                LOG.warning('isolation: %s', exc)
                failed.append(str(exc))
        return failed

    def _restore_unit(self, unit: str, props: typing.Mapping[str, str],
                      reserved: typing.Optional[frozenset[int]] = None
                      ) -> None:
        cpus, mems = self.online or (None, None)
        target = dict(props)
        recorded = props.get('AllowedCPUs', '')
        if recorded and not _holds(recorded, reserved):
            LOG.warning(
                'isolation: %s: the recorded AllowedCPUs=%s leaves out '
                'reserved CPUs %s, to which apply confined it: not what a '
                'unit confined by hand had (a forged D-Bus reply could '
                'have recorded it); giving it every CPU instead', unit,
                recorded, cpuset.format(reserved or frozenset()))
            target['AllowedCPUs'] = ''
        wide: dict[str, str] = {}
        if cpus:
            wide['AllowedCPUs'] = cpuset.format(cpus)
        if mems and 'AllowedMemoryNodes' in target:
            wide['AllowedMemoryNodes'] = cpuset.format(mems)
        if wide:
            # systemd writes a set to the kernel, never an empty one: the
            # unit gets every CPU first, whatever it gets back after.
            self._set(unit, wide)
        self._set(unit, target)
        if cpus:
            value = target.get('AllowedCPUs', '')
            try:
                expected = cpuset.format(cpus & cpuset.parse(
                    ','.join(value.split())) if value else cpus)
            except cpuset.CpusetError as exc:
                raise BackendError('%s: recorded AllowedCPUs=%s: %s'
                                   % (unit, value, exc)) from None
            effective = _canonical(self.show(unit).get('EffectiveCPUs', ''))
            # Empty: systemd switched the unit's cpuset controller off
            # (nothing restricts it: seen on an empty user.slice).
            if effective not in ('', expected):
                raise BackendError(
                    '%s: still on CPUs %s after AllowedCPUs=%s (expected '
                    '%s; online: %s)' % (unit, effective, value, expected,
                                         cpuset.format(cpus)))

    def status(self, timeout: typing.Optional[float] = None
               ) -> statusfile.Status:
        """The units as systemd reports them, each asked within
        ``timeout`` seconds: once systemd did not answer one in time,
        the units after it are not asked (each says so), so a hung
        systemd costs one ``timeout`` and a slow one at most ``timeout``
        a unit (issue 47: one deadline for all, 5 s, left 0.7 s to the
        third unit of a loaded host, which then was unknown).
        ``units_unknown``: how many could not be read."""
        units: dict[str, dict[str, str]] = {}
        unreachable: typing.Optional[str] = None
        for unit in self.slices + [GUESTS]:
            if unreachable is not None:
                units[unit] = {'error': 'not asked: %s' % unreachable}
                continue
            try:
                units[unit] = self.show(unit, None if timeout is None else
                                        time.monotonic() + timeout)
            except BackendUnreachable as exc:
                unreachable = str(exc)
                units[unit] = {'error': unreachable}
            except BackendError as exc:
                units[unit] = {'error': str(exc)}
        confined = [u for u in self.slices
                    if _canonical(units[u].get('EffectiveCPUs', '')) ==
                    cpuset.format(self.cpus)]
        return {'slices': units, 'confined': len(confined),
                'not_confined': len(self.slices) - len(confined),
                'units_unknown': sum(1 for u in units.values()
                                     if 'error' in u),
                'systemd_through': str(self.systemd)}


def _holds(text: str, cpus: typing.Optional[frozenset[int]]) -> bool:
    """Whether CPU list ``text`` (systemd's syntax) holds every CPU of
    ``cpus`` (True when ``cpus`` is unknown)."""
    if not cpus:
        return True
    try:
        return cpus <= cpuset.parse(','.join(text.split()))
    except cpuset.CpusetError:
        return False


def _canonical(text: str) -> str:
    """systemd prints CPU sets its own way ("0-1" or "0 1")."""
    try:
        return cpuset.format(cpuset.parse(
            ','.join(text.split()), allow_empty=True))
    except cpuset.CpusetError:
        return text
