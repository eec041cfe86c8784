"""Live migration and rescue: nova's guest XML without our pins.

Two places in nova's libvirt driver turn a guest's *live* XML, which
carries our live-only pins, into a domain definition:

* ``nova.virt.libvirt.migration.get_updated_guest_xml`` builds the
  destination XML of a live migration from ``dumpxml --migratable``
  (``LibvirtDriver._live_migration_operation`` looks it up on the module
  at each migration);
* ``LibvirtDriver._get_existing_domain_xml`` returns the live XML, which
  ``rescue`` saves as ``unrescue.xml`` and ``unrescue`` defines again as
  the persistent domain, and which ``resume`` re-creates the guest from.

``install()`` wraps both so that what they return has our pins taken
out (``migratexml.strip_pins``); the pass after the operation binds the
guest again.

Invariants:

* it works from activation on, whatever any pass did or is doing: the
  XML nova built is edited, not the guest, and no libvirt call or lock
  is involved, so a source whose pass is in flight changes nothing;
* it never fails nova's operation: if stripping fails for any reason,
  nova's XML is returned as nova made it, and the failure is logged;
* nova-placed guests (an instance NUMA topology) are returned unchanged
  (``migratexml``);
* idempotent (the tests restore nova's functions with
  ``tests.fixtures.uninstall_migration_filter``, which unwraps what
  carries ``MARK``).
"""

import functools
import types
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import migratexml

LOG = logging.getLogger(__name__)
MARK = '_nova_pinning_strip'
FUNCTION = 'get_updated_guest_xml'
METHOD = '_get_existing_domain_xml'


def _module() -> types.ModuleType:
    from nova.virt.libvirt import migration
    module: types.ModuleType = migration  # nova's: untyped here
    return module


def _driver_class() -> type:
    from nova.virt.libvirt import driver
    cls: type = driver.LibvirtDriver  # nova's: untyped here
    return cls


def _stripping(original: typing.Callable[..., typing.Any], what: str
               ) -> typing.Callable[..., typing.Any]:
    @functools.wraps(original)
    def wrapper(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        xml = original(*args, **kwargs)
        try:
            stripped, removed = migratexml.strip_pins(xml)
        except Exception:  # never fail nova's operation for this
            LOG.exception('nova-pinning-hooks: could not take our pins out '
                          'of the %s; used as nova made it', what)
            return xml
        if removed:
            LOG.info('nova-pinning-hooks: %d pin element(s) left out of the '
                     '%s; the next pass binds the guest', removed, what)
        return stripped

    setattr(wrapper, MARK, True)
    return wrapper


def _wrap(owner: typing.Union[type, types.ModuleType], name: str,
          what: str) -> bool:
    original = owner.__dict__.get(name) if isinstance(owner, type) else \
        getattr(owner, name, None)
    if original is None:
        LOG.warning('nova-pinning-hooks: %s has no %s: the %s carries our '
                    'pins', getattr(owner, '__name__', owner), name, what)
        return False
    if not getattr(original, MARK, False):
        setattr(owner, name, _stripping(original, what))
    return True


def install(module: typing.Optional[types.ModuleType] = None,
            driver_cls: typing.Optional[type] = None) -> bool:
    """Wrap the live migration XML function and the driver's existing-XML
    method; True if both are wrapped (now or before), False if this nova
    lacks one of them (logged)."""
    module = module or _module()
    driver_cls = driver_cls or _driver_class()
    migrating = _wrap(module, FUNCTION, 'live migration XML')
    existing = _wrap(driver_cls, METHOD, 'XML kept for unrescue and resume')
    return migrating and existing
