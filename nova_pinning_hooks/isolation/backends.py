"""Which backend confines the host's processes: systemd or cgroup v1.

``backend_for(settings)`` gives the backend of ``settings.mode``; both
have the same small interface, ``Backend`` (``record``, ``ensure``,
``status``), so the isolator and ``status`` never ask which one they
hold. Only cgroup v1 moves processes (``moves_processes``): the
isolator's moves take it as a ``cgroupv1.CgroupV1``.

Invariant: choosing a backend changes nothing on the host (each reads
and writes only when called).
"""

import typing

from nova_pinning_hooks.isolation import cgroupv1
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation import statusfile
from nova_pinning_hooks.isolation import systemd


class Backend(typing.Protocol):
    """What the isolator and ``status`` ask of either backend."""

    name: state.CgroupMode  # the mode it is
    moves_processes: bool  # cgroup v1: processes are moved one by one

    def record(self) -> state.BackendRecord:
        """What the state file keeps to undo this backend's changes."""

    def ensure(self, deadline: typing.Optional[float] = None) -> None:
        """Make the confinement exist as configured (idempotent),
        asking nothing after ``deadline`` (a ``time.monotonic()``
        time)."""

    def status(self, timeout: typing.Optional[float] = None
               ) -> statusfile.Status:
        """What ``status`` shows of it (never raises), each unit asked
        within ``timeout`` seconds, none after one that was not."""


def backend_for(settings: config.Settings) -> Backend:
    if settings.mode == state.CgroupMode.SYSTEMD:
        return systemd.Systemd.from_settings(settings)
    return cgroupv1.CgroupV1.from_settings(settings)
