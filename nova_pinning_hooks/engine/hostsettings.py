"""The ratio and CPU sets a plan takes from outside libvirt: one shape.

nova's CPU allocation ratio and CPU sets reach a plan from one of two
edges: the overcommit file nova-compute writes (``host.overcommitfile``)
or ``[nova_pinning] allocation_ratio`` (``passes.settings``). Both read
them into a ``HostSettings``, and a live snapshot
(``snapshot.LiveSnapshot``) carries that record to the policy unchanged;
the snapshot JSON (``nova-pinning snapshot``, ``plan --snapshot``) holds
the same fields as keys (``snapshot_fields``).

Invariants:

* a ``HostSettings`` is only made by an edge that checked its ratio
  (``policy.ratio_ok``: a number > 0 and at most ``policy.MAX_RATIO``);
  the policy checks it once more when it plans (``policy.validate``),
  and nothing between them does;
* CPU sets are CPU set text or None, as the file and a snapshot hold
  them (parsed against the host's CPUs by ``snapshot``);
* ``written_at`` and ``host`` are the overcommit file's, None when the
  option stood in for it.
"""

import dataclasses
import typing

from nova_pinning_hooks.engine import cpuset

# What ``snapshot_fields`` returns: the snapshot JSON's keys and values.
SnapshotFields = dict[str, typing.Union[float, str, None]]


@dataclasses.dataclass(frozen=True)
class HostSettings:
    """nova's ratio and CPU sets, as an edge read them."""

    allocation_ratio: float
    # where the ratio came from: an option's name, or 'placement'
    ratio_source: str
    reserved_cpus: typing.Optional[str] = None
    shared_cpus: typing.Optional[str] = None  # nova's cpu_shared_set
    dedicated_cpus: typing.Optional[str] = None  # nova's cpu_dedicated_set
    written_at: typing.Optional[str] = None  # the file's, ISO 8601
    host: typing.Optional[str] = None  # the file's: nova's host name

    def snapshot_fields(self) -> SnapshotFields:
        """The snapshot's keys these settings fill, in the order a
        snapshot holds them."""
        return {'allocation_ratio': self.allocation_ratio,
                'ratio_source': self.ratio_source,
                'reserved_cpus': self.reserved_cpus,
                'shared_cpus': self.shared_cpus,
                'dedicated_cpus': self.dedicated_cpus}

    def binding(self) -> tuple[float, typing.Optional[frozenset[int]],
                               typing.Optional[frozenset[int]]]:
        """What a pass binds with from these: the ratio and nova's CPU
        sets (parsed: two texts of one set are the same)."""
        def cpus(text: typing.Optional[str]
                 ) -> typing.Optional[frozenset[int]]:
            return None if text is None else cpuset.parse(text)
        return (float(self.allocation_ratio), cpus(self.shared_cpus),
                cpus(self.dedicated_cpus))

    def nova_sets(self) -> typing.Optional[
            tuple[typing.Optional[str], typing.Optional[str]]]:
        """nova's (cpu_shared_set, cpu_dedicated_set) as the overcommit
        file had them; None when the option stood in and the file was
        not read (a reader that needs nova's sets reads it then)."""
        if self.written_at is None:
            return None
        return self.shared_cpus, self.dedicated_cpus
