"""What a pass reads besides libvirt: the ratio, its source, CPU sets.

``load(conf)`` reads them once into a ``HostSettings``: ``[nova_pinning]
allocation_ratio`` when it is set, else the overcommit file nova-compute
writes (``host.overcommitfile``: its format and checks). A pass reads
them once (``reconciler.Reconciler.read``), and a metrics scrape once
too: ``observe.metrics.read_view`` hands the one it read to the plan,
the isolation state and the file's times, so each opens the file once.
``policy_overrides`` gives the policy's other options, one
``[nova_pinning]`` option per ``policy.Options`` field.

Invariants:

* ``load`` raises ``SettingsError`` (one message naming the file or the
  option) or returns settings whose ratio passed the edge's check: the
  option's (> 0) or the file's (``overcommitfile.read``);
* CPU sets are CPU set text or None, as a snapshot holds them;
* ``written_at`` is the file's, None when the option stands in for it.
"""

import dataclasses
import typing

from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.host import overcommitfile

# The fields of ``policy.Options`` a snapshot carries (``HostSettings``);
# every other field is the ``[nova_pinning]`` option of the same name.
FROM_SNAPSHOT = frozenset(('allocation_ratio', 'reserved_cpus',
                           'shared_cpus', 'dedicated_cpus'))


class SettingsError(Exception):
    """The ratio or CPU sets a pass needs are missing or invalid."""


@dataclasses.dataclass(frozen=True)
class HostSettings:
    allocation_ratio: float
    ratio_source: str
    reserved_cpus: typing.Optional[str] = None
    shared_cpus: typing.Optional[str] = None
    dedicated_cpus: typing.Optional[str] = None
    written_at: typing.Optional[str] = None

    def snapshot_fields(self) -> typing.Dict[
            str, typing.Union[float, str, None]]:
        """The snapshot's keys these settings fill."""
        return {'allocation_ratio': self.allocation_ratio,
                'ratio_source': self.ratio_source,
                'reserved_cpus': self.reserved_cpus,
                'shared_cpus': self.shared_cpus,
                'dedicated_cpus': self.dedicated_cpus}

    def nova_sets(self) -> typing.Optional[
            typing.Tuple[typing.Optional[str], typing.Optional[str]]]:
        """nova's (cpu_shared_set, cpu_dedicated_set) as the overcommit
        file had them; None when the option stood in and the file was
        not read (a reader that needs nova's sets reads it then)."""
        if self.written_at is None:
            return None
        return self.shared_cpus, self.dedicated_cpus


def load(conf: typing.Any) -> HostSettings:
    """Ratio and CPU sets for a pass, from ``conf`` (``[nova_pinning]``).

    ``allocation_ratio`` wins when set; otherwise the overcommit file
    that the nova plugin writes supplies the ratio and nova's CPU sets.
    """
    group = conf.nova_pinning
    reserved = group.reserved_cpus or None
    if group.allocation_ratio is not None:
        if group.allocation_ratio <= 0:
            raise SettingsError('[nova_pinning] allocation_ratio must be '
                                '> 0, not %s' % group.allocation_ratio)
        return HostSettings(allocation_ratio=group.allocation_ratio,
                            ratio_source='[nova_pinning] allocation_ratio',
                            reserved_cpus=reserved)
    try:
        info = overcommitfile.read(group.overcommit_file)
    except overcommitfile.OvercommitError as exc:
        raise SettingsError(str(exc)) from None
    return HostSettings(allocation_ratio=info.allocation_ratio,
                        ratio_source=info.ratio_source or 'unknown',
                        reserved_cpus=reserved,
                        shared_cpus=info.shared_cpus,
                        dedicated_cpus=info.dedicated_cpus,
                        written_at=info.written_at)


def policy_overrides(conf: typing.Any) -> typing.Dict[str, typing.Any]:
    """The policy's options that come from configuration, not from the
    snapshot: every ``policy.Options`` field outside ``FROM_SNAPSHOT``,
    read from the ``[nova_pinning]`` option of its name. A field added to
    ``Options`` without its option fails every pass loudly
    (``NoSuchOptError``), never silently keeps its default;
    ``tests/unit/passes/test_settings.py`` says which."""
    group = conf.nova_pinning
    return {f.name: getattr(group, f.name)
            for f in dataclasses.fields(policy.Options)
            if f.name not in FROM_SNAPSHOT}

