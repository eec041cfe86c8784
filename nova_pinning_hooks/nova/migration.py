"""Live migration: wrap nova's destination-XML function.

``install()`` replaces ``nova.virt.libvirt.migration.get_updated_guest_xml``
(which ``LibvirtDriver._live_migration_operation`` looks up on the module
at each migration) with a wrapper that returns nova's XML with our pins
taken out (``migratexml.strip_pins``).

Invariants:

* it works from activation on, whatever any pass did or is doing: the
  XML nova built is edited, not the guest, and no libvirt call or lock
  is involved, so a source whose pass is in flight changes nothing;
* it never fails a migration: if stripping fails for any reason, nova's
  XML is returned as nova made it, and the failure is logged;
* idempotent, and ``uninstall`` restores nova's function (tests).
"""

import functools

from oslo_log import log as logging

from nova_pinning_hooks import migratexml

LOG = logging.getLogger(__name__)
MARK = '_nova_pinning_strip'
FUNCTION = 'get_updated_guest_xml'


def _module():
    from nova.virt.libvirt import migration
    return migration


def install(module=None):
    """Wrap the destination-XML function; True if wrapped now or before,
    False if this nova has none (logged)."""
    module = module or _module()
    original = getattr(module, FUNCTION, None)
    if original is None:
        LOG.warning('nova-pinning-hooks: %s has no %s: live migrations '
                    'carry our pins', module.__name__, FUNCTION)
        return False
    if getattr(original, MARK, False):
        return True

    @functools.wraps(original)
    def get_updated_guest_xml(*args, **kwargs):
        xml = original(*args, **kwargs)
        try:
            stripped, removed = migratexml.strip_pins(xml)
        except Exception:  # never fail nova's migration for this
            LOG.exception('nova-pinning-hooks: could not take our pins out '
                          'of the live migration XML; sent as nova made it')
            return xml
        if removed:
            LOG.info('nova-pinning-hooks: %d pin element(s) left out of the '
                     'live migration XML; the destination binds the guest',
                     removed)
        return stripped

    setattr(get_updated_guest_xml, MARK, True)
    setattr(module, FUNCTION, get_updated_guest_xml)
    return True


def uninstall(module=None):
    module = module or _module()
    current = getattr(module, FUNCTION, None)
    if getattr(current, MARK, False):
        setattr(module, FUNCTION, current.__wrapped__)
