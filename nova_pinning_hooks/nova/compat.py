"""What nova-pinning-hooks needs of the running nova, checked before it
switches anything on.

The package wraps private parts of nova. ``lacking`` names those the
running nova does not have in the shape the package uses;
``activation.activate`` refuses to activate when any is lacking.

Invariants:

* by capability, never by nova's version number: the names the package
  wraps and the parameters its hooks read (``update_provider_tree``'s
  ``provider_tree`` and ``nodename``, read by position or by name);
  ``tested`` (whether a version is of the release matrix) only informs
  ``nova-pinning-status upgrade check`` (``compatprobe``), never
  activation;
* pure: reads the objects it is given, imports nothing, changes nothing;
* all or nothing: ``activation.activate`` installs no hook unless ``lacking``
  returned nothing, and otherwise logs one line naming everything that
  is lacking, so a nova-compute is never left half-activated.

The hooked ComputeManager methods are not checked here: each is optional
(``[nova_pinning] hooked_methods``: one a release lacks is skipped and
logged by ``hookpoints``), and the periodic pass and libvirt's events
cover what it would have requested. What is checked here is what, if
lacking, would leave our live-only pins in a live migration's
destination or in the XML unrescue defines, or the overcommit file on a
stale ratio.
"""

import inspect
import types
import typing

from nova_pinning_hooks.nova import migration

RATIO_PARAMETERS = ['provider_tree', 'nodename']
# The nova releases (major versions) the package is tested with, each
# inside its own functional test framework
# (doc/source/reference/nova-integration.rst, "Release
# matrix"). Another release is checked by capability all the same
# (``lacking``); ``nova-pinning-status upgrade check`` warns of it.
TESTED = (29, 34)  # from, to (inclusive)


def _parameters(func: typing.Callable[..., typing.Any]
                ) -> typing.Optional[list[str]]:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None


def lacking(driver_cls: typing.Optional[type],
            migration_module: typing.Optional[types.ModuleType]
            ) -> list[str]:
    """What this nova lacks, as ``Owner.name`` strings; empty when the
    package can switch on. ``None`` for either: nova's libvirt driver
    could not be imported."""
    if driver_cls is None or migration_module is None:
        return ['nova.virt.libvirt (not importable)']
    out = []
    ratio = getattr(driver_cls, 'update_provider_tree', None)
    params = _parameters(ratio) if callable(ratio) else None
    if not params or params[1:3] != RATIO_PARAMETERS:
        out.append('LibvirtDriver.update_provider_tree(self, %s, ...)'
                   % ', '.join(RATIO_PARAMETERS))
    if not callable(getattr(driver_cls, migration.METHOD, None)):
        out.append('LibvirtDriver.%s' % migration.METHOD)
    if not callable(getattr(migration_module, migration.FUNCTION, None)):
        out.append('nova.virt.libvirt.migration.%s' % migration.FUNCTION)
    return out


def tested(version: str) -> bool:
    """True if nova ``version`` (``34.0.0``) is of a tested release."""
    major = version.split('.', 1)[0]
    return major.isdigit() and TESTED[0] <= int(major) <= TESTED[1]
