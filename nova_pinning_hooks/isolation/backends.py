"""Which backend confines the host's processes: systemd or cgroup v1.

``backend_for(settings)`` gives the backend of ``settings.mode``; both
have the same small interface (``apply``, ``status``, ``undo`` ...), so
the isolator and ``status`` never ask which one they hold.

Invariant: choosing a backend changes nothing on the host (each reads
and writes only when called).
"""

import typing

from nova_pinning_hooks.isolation import cgroupv1
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import systemd


def backend_for(settings: config.Settings
                ) -> typing.Union[systemd.Systemd, cgroupv1.CgroupV1]:
    if settings.mode == 'systemd':
        return systemd.Systemd.from_settings(settings)
    return cgroupv1.CgroupV1.from_settings(settings)
