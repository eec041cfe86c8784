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
reported success (seen on the 2-node VM, tests/vm). ``restore`` widens a
unit to every online CPU (and memory node) first, then sets the recorded
value, and checks ``EffectiveCPUs`` afterwards (every online CPU, or empty
when systemd switched the unit's cpuset off): a unit still confined is a
failure, never a success.

systemd is reached through ``Systemctl`` (the command, on PATH) or,
where there is none (kolla's images), ``systemdbus.Manager`` (its D-Bus
API on the system bus): the same two requests, ``show`` and
``set_runtime``, with the same values, so the units, the undo and the
state file are the same either way. systemctl always runs with an
argument list, never through a shell.
"""

import subprocess
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.isolation import BackendError
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import systemdbus

LOG = logging.getLogger(__name__)

GUESTS = 'machine.slice'
TIMEOUT = 60


def _props(text: str) -> dict[str, str]:
    return dict(line.split('=', 1) for line in text.splitlines()
                if '=' in line)


class Systemctl:
    """systemd through its command-line client."""

    def __init__(self, path: str = 'systemctl') -> None:
        self.path = path

    def __str__(self) -> str:
        return self.path

    def _run(self, *args: str) -> str:
        argv = [self.path] + list(args)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=TIMEOUT, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BackendError('%s failed: %s' % (' '.join(argv), exc)) \
                from None
        if proc.returncode:
            raise BackendError('%s: %s' % (' '.join(argv),
                                           proc.stderr.strip() or
                                           'exit status %d'
                                           % proc.returncode))
        return proc.stdout

    def show(self, unit: str) -> dict[str, str]:
        """The unit's CPU properties, as systemd reports them."""
        return _props(self._run('show', '-p', 'AllowedCPUs', '-p',
                                'EffectiveCPUs', '-p', 'AllowedMemoryNodes',
                                unit))

    def set_runtime(self, unit: str,
                    props: typing.Mapping[str, str]) -> None:
        self._run('set-property', '--runtime', unit,
                  *['%s=%s' % kv for kv in sorted(props.items())])


def manager(systemctl: typing.Optional[str] = None,
            system_bus: typing.Optional[str] = None
            ) -> typing.Union[Systemctl, systemdbus.Manager]:
    """How systemd is reached: its command when there is one, otherwise
    its D-Bus API on the system bus at ``system_bus``."""
    if systemctl or not system_bus:
        return Systemctl(systemctl or 'systemctl')
    return systemdbus.Manager(systemdbus.Bus(system_bus))


class Systemd:

    name = 'systemd'
    moves_processes = False

    def __init__(self, slices: typing.Iterable[str],
                 cpus: typing.Optional[frozenset[int]] = None,
                 mems: typing.Optional[frozenset[int]] = None,
                 systemctl: typing.Optional[str] = 'systemctl',
                 online: typing.Optional[
                     tuple[frozenset[int], frozenset[int]]] = None,
                 system_bus: typing.Optional[str] = None) -> None:
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

    def show(self, unit: str) -> dict[str, str]:
        """The unit's CPU properties, as systemd reports them."""
        return self.systemd.show(unit)

    def _wanted(self) -> dict[str, str]:
        props = {'AllowedCPUs': cpuset.format(self.cpus)}
        if self.mems:
            props['AllowedMemoryNodes'] = cpuset.format(self.mems)
        return props

    def record(self) -> dict[str, typing.Any]:
        previous: dict[str, dict[str, str]] = {}
        for unit in self.slices:
            now = self.show(unit)
            previous[unit] = {key: now.get(key, '')
                              for key in self._wanted()}
        return {'slices': list(self.slices), 'previous': previous}

    def _set(self, unit: str, props: typing.Mapping[str, str]) -> None:
        self.systemd.set_runtime(unit, props)

    def drifted(self) -> list[str]:
        """Units whose properties are not (or no longer) ours."""
        wanted = self._wanted()
        return [unit for unit in self.slices
                if any(_canonical(self.show(unit).get(k, '')) != v
                       for k, v in wanted.items())]

    def ensure(self) -> None:
        for unit in self.drifted():
            self._set(unit, self._wanted())
            effective = _canonical(self.show(unit).get('EffectiveCPUs', ''))
            if effective != cpuset.format(self.cpus):
                # systemd took the property but the kernel did not apply
                # it (no cpuset controller where systemd looks).
                raise BackendError(
                    '%s: systemd accepted AllowedCPUs=%s but its '
                    'EffectiveCPUs are %r: not confined' % (
                        unit, cpuset.format(self.cpus), effective))
            LOG.info('isolation: %s confined to CPUs %s', unit,
                     cpuset.format(self.cpus))

    def restore(self, record: typing.Mapping[str, typing.Any]) -> list[str]:
        """Give every recorded unit its previous values back; a list of
        what failed."""
        failed: list[str] = []
        for unit, props in sorted(record.get('previous', {}).items()):
            try:
                self._restore_unit(unit, props)
            except BackendError as exc:
                LOG.warning('isolation: %s', exc)
                failed.append(str(exc))
        return failed

    def _restore_unit(self, unit: str,
                      props: typing.Mapping[str, str]) -> None:
        cpus, mems = self.online or (None, None)
        wide: dict[str, str] = {}
        if cpus and not props.get('AllowedCPUs'):
            wide['AllowedCPUs'] = cpuset.format(cpus)
        if mems and 'AllowedMemoryNodes' in props and \
                not props['AllowedMemoryNodes']:
            wide['AllowedMemoryNodes'] = cpuset.format(mems)
        if wide:
            # systemd writes a set to the kernel, never an empty one.
            self._set(unit, wide)
        self._set(unit, props)
        if 'AllowedCPUs' in wide:
            effective = _canonical(self.show(unit).get('EffectiveCPUs', ''))
            # Empty: systemd switched the unit's cpuset controller off
            # (nothing restricts it: seen on an empty user.slice).
            if effective not in ('', wide['AllowedCPUs']):
                raise BackendError(
                    '%s: still on CPUs %s after AllowedCPUs= (online: %s)'
                    % (unit, effective, wide['AllowedCPUs']))

    def status(self) -> dict[str, typing.Any]:
        units: dict[str, dict[str, str]] = {}
        for unit in self.slices + [GUESTS]:
            try:
                units[unit] = self.show(unit)
            except BackendError as exc:
                units[unit] = {'error': str(exc)}
        confined = [u for u in self.slices
                    if _canonical(units[u].get('EffectiveCPUs', '')) ==
                    cpuset.format(self.cpus)]
        return {'slices': units, 'confined': len(confined),
                'not_confined': len(self.slices) - len(confined),
                'systemd_through': str(self.systemd)}


def _canonical(text: str) -> str:
    """systemd prints CPU sets its own way ("0-1" or "0 1")."""
    try:
        return cpuset.format(cpuset.parse(
            ','.join(text.split()), allow_empty=True))
    except cpuset.CpusetError:
        return text
