"""The passes' configuration edge: ``[nova_pinning]`` read once into
``PassSettings``.

``read(conf)`` looks into an oslo.config object once, and a
``reconciler.Reconciler`` is handed the record, never ``conf``:
``PassSettings``: the switch, the connection (its URI and
``virt.HostOptions``), the lock, the pass times (``PassTimes``), where
the ratio comes from (``RatioSource``) and the policy's options
(``policy``). Each layer above reads its own record the same way, in
its own folder (``observe/settings``, ``runtime/settings``: the
long-lived service's, which holds this one).

What a pass reads besides libvirt, the ratio and CPU sets, is read at
each pass, not here: ``load(source)`` reads them into a
``hostsettings.HostSettings`` (``[nova_pinning] allocation_ratio`` when
it is set, else the overcommit file nova-compute writes,
``host.overcommitfile``: its format and checks). A pass reads them once
(``reconciler.Reconciler.read``), and a metrics scrape once too:
``observe.metrics.read_view`` hands the one it read to the plan, the
isolation state and the file's times, so each opens the file once.

Invariants:

* the records are frozen: what a process read at its start is what its
  passes use (a command that overrides an option, ``--connection``,
  does so before it reads);
* ``PassSettings.policy`` holds every ``policy.Options`` field outside
  ``FROM_SNAPSHOT``, from the ``[nova_pinning]`` option of its name: a
  field added to ``Options`` without its option fails ``read`` loudly
  (``NoSuchOptError``), never silently keeps its default;
* ``load`` raises ``SettingsError`` (one message naming the file or the
  option) or returns settings whose ratio passed one of the ratio's two
  edges: the option's (``policy.ratio_ok``, here) or the file's
  (``overcommitfile.read``);
* ``written_at`` is the file's, None when the option stands in for it.
"""

import dataclasses
import typing

from oslo_config import cfg

from nova_pinning_hooks.engine import hostsettings
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.host import virt

# The ratio's one shape (``engine.hostsettings``), named where passes
# and the layers above look for it.
HostSettings = hostsettings.HostSettings

# The fields of ``policy.Options`` a snapshot carries (``HostSettings``);
# every other field is the ``[nova_pinning]`` option of the same name.
FROM_SNAPSHOT = frozenset(('allocation_ratio', 'reserved_cpus',
                           'shared_cpus', 'dedicated_cpus'))

# A policy option's value, as oslo.config gives it.
PolicyValue = typing.Union[str, float, bool]


class SettingsError(Exception):
    """The ratio or CPU sets a pass needs are missing or invalid."""


@dataclasses.dataclass(frozen=True)
class RatioSource:
    """Where a pass finds the ratio and CPU sets (``load``)."""

    allocation_ratio: typing.Optional[float]  # the option; None: the file
    overcommit_file: str
    reserved_cpus: typing.Optional[str]  # CPU set text, None when unset


@dataclasses.dataclass(frozen=True)
class PassTimes:
    """How long a pass may take and how often passes come, in seconds."""

    lock_timeout: float
    pass_timeout: float
    resync_interval: float
    coalesce_delay: float
    vcpu_poll_interval: float
    periodic_interval: float
    summary_max_age: float


@dataclasses.dataclass(frozen=True)
class PassSettings:
    """What a ``reconciler.Reconciler`` needs of the configuration."""

    enabled: bool
    connection_uri: str
    lock_path: str
    times: PassTimes
    host: virt.HostOptions
    ratio: RatioSource
    # (field, value) of every ``policy.Options`` field outside
    # ``FROM_SNAPSHOT``, by name
    policy: tuple[tuple[str, PolicyValue], ...]

    def policy_overrides(self) -> dict[str, PolicyValue]:
        """The policy's options that come from configuration, not from
        the snapshot (``snapshot.load``'s ``overrides``)."""
        return dict(self.policy)


def read(conf: cfg.ConfigOpts) -> PassSettings:
    """A reconciler's record, from ``conf`` (an oslo.config
    ``ConfigOpts`` with the package's options registered)."""
    group = conf.nova_pinning
    times = PassTimes(**{f.name: getattr(group, f.name)
                         for f in dataclasses.fields(PassTimes)})
    return PassSettings(
        enabled=group.enabled, connection_uri=group.connection_uri,
        lock_path=group.lock_path, times=times,
        host=virt.HostOptions(**{f.name: getattr(group, f.name) for f in
                                 dataclasses.fields(virt.HostOptions)}),
        ratio=RatioSource(allocation_ratio=group.allocation_ratio,
                          overcommit_file=group.overcommit_file,
                          reserved_cpus=group.reserved_cpus or None),
        policy=tuple(policy_overrides(conf).items()))


def policy_overrides(conf: cfg.ConfigOpts) -> dict[str, PolicyValue]:
    """The policy's options that come from configuration, not from the
    snapshot: every ``policy.Options`` field outside ``FROM_SNAPSHOT``,
    read from the ``[nova_pinning]`` option of its name (``plan
    --snapshot`` takes them so; a pass from ``PassSettings.policy``). A
    field added to ``Options`` without its option fails loudly
    (``NoSuchOptError``), never silently keeps its default;
    ``tests/unit/passes/test_settings.py`` says which."""
    group = conf.nova_pinning
    return {f.name: getattr(group, f.name)
            for f in dataclasses.fields(policy.Options)
            if f.name not in FROM_SNAPSHOT}


def load(source: RatioSource) -> HostSettings:
    """Ratio and CPU sets for a pass, from where ``source`` says.

    ``allocation_ratio`` wins when set (checked here: one of the ratio's
    two edges); otherwise the overcommit file that the nova plugin
    writes supplies the ratio and nova's CPU sets (checked by its
    reader, the other edge).
    """
    reserved = source.reserved_cpus
    if source.allocation_ratio is not None:
        if not policy.ratio_ok(source.allocation_ratio):
            raise SettingsError('[nova_pinning] allocation_ratio must be '
                                '> 0 and at most %g, not %s'
                                % (policy.MAX_RATIO,
                                   source.allocation_ratio))
        return HostSettings(allocation_ratio=source.allocation_ratio,
                            ratio_source='[nova_pinning] allocation_ratio',
                            reserved_cpus=reserved)
    try:
        info = overcommitfile.read(source.overcommit_file)
    except overcommitfile.OvercommitError as exc:
        raise SettingsError(str(exc)) from None
    return dataclasses.replace(info, ratio_source=info.ratio_source or
                               'unknown', reserved_cpus=reserved,
                               host=None)
