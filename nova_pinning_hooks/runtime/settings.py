"""The long-lived service's configuration edge: every record a process
that runs passes needs, read once (the agent command, nova-compute's
activation).

Invariant: frozen; the binding service (``service``) and nova-compute's
pass runner are handed it, and hand each part down (the reconciler's,
the metrics'), never ``conf``.
"""

import dataclasses

from oslo_config import cfg

from nova_pinning_hooks.observe import settings as observe_settings
from nova_pinning_hooks.passes import settings as pass_settings


@dataclasses.dataclass(frozen=True)
class RuntimeSettings:
    """What a long-lived process that runs passes needs: the binding
    service (``runtime.service``) and nova-compute's pass runner."""

    passes: pass_settings.PassSettings
    observe: observe_settings.ObserveSettings
    summary_file: str
    report_summary: bool
    # [nova_pinning] memory_home: the memory-home thread (passes.memhome)
    memory_home: bool = True
    # the configuration a worker process is started with (nova's)
    config_files: tuple[str, ...] = ()
    config_dirs: tuple[str, ...] = ()


def read(conf: cfg.ConfigOpts) -> RuntimeSettings:
    """Every record, from ``conf`` (an oslo.config ``ConfigOpts`` with
    the package's options registered)."""
    group = conf.nova_pinning
    return RuntimeSettings(
        passes=pass_settings.read(conf), observe=observe_settings.read(conf),
        summary_file=group.summary_file,
        report_summary=group.report_summary,
        memory_home=group.memory_home,
        config_files=tuple(getattr(conf, 'config_file', None) or ()),
        config_dirs=tuple(getattr(conf, 'config_dir', None) or ()))
