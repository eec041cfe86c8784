"""What a pass needs of the host: the seam between passes and host.

``PassHost`` is the connection a ``reconciler.Reconciler`` (and the
runtime's vCPU poll) uses, as a ``typing.Protocol``: ``host.virt.Host``
is one; the type checker holds it to this shape, and nothing above
``host`` asks more of it (no ``getattr``/``hasattr`` probing).

Invariants:

* every method is bounded in time by the host (``set_deadline``, its
  per-call bound); a fault is raised as one for which
  ``host.libvirtapi.is_host_error`` is true, or as ``OSError``;
* ``calls`` counts the libvirt calls made, by kind (``read``,
  ``write``) and by API name, never decreasing;
* ``apply`` never raises for a libvirt fault: it returns what it wrote,
  skipped and why it stopped (``host.virtwrite.ApplyResult``).
"""

import typing

from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import snapshot as snapshot_mod
from nova_pinning_hooks.host import model as model_mod
from nova_pinning_hooks.host import virt
from nova_pinning_hooks.host import virtread
from nova_pinning_hooks.host import virtwrite

# The host's own types, named where the passes meet it.
ApplyResult = virtwrite.ApplyResult
VcpuSample = virtread.VcpuSample
VcpuStats = virtread.VcpuStats


class PassHost(typing.Protocol):

    @property
    def calls(self) -> typing.Mapping[str, int]:
        """The libvirt calls made, by kind and by API name (read-only
        here: ``virt.Host``'s is a ``collections.Counter``)."""

    def read_snapshot(self, model: typing.Optional[model_mod.HostModel] = None
                      ) -> snapshot_mod.LiveSnapshot:
        """The live host, without the ratio and CPU sets (read what the
        model cannot vouch for)."""

    def apply(self, changes: list[plan_mod.PinChange]
              ) -> ApplyResult:
        """Write ``changes`` (``plan.PinChange``) live."""

    def vcpu_stats(self) -> VcpuStats:
        """(monotonic time, {uuid: counters}) of every running guest."""

    def vcpu_counts(self) -> dict[str, int]:
        """{uuid: vCPUs online} of every running guest."""

    def set_deadline(self, deadline: typing.Optional[float]) -> None:
        """Bound every later call by ``deadline`` (monotonic)."""

    def unknown_facts(self) -> dict[str, typing.Optional[str]]:
        """{guest name: why} of the guests whose qemu process could not
        be proven (``qemuproof``): their /proc facts are unknown."""

    def watch(self, model: model_mod.HostModel,
              on_change: typing.Callable[[str], object]) -> None:
        """Follow libvirt's domain events into ``model``."""

    def close(self) -> None:
        """Close the connection (and unregister its events)."""


Connect = typing.Callable[[str, virt.HostOptions], PassHost]
