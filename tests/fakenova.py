"""A fake nova distribution on disk, for the child Python that
``nova-pinning-status upgrade check`` asks (``nova.compatprobe``): just
the names ``nova.compat`` looks for, in the shapes the supported nova
releases have them (tools/nova-releases), and the distribution's
metadata (its version: the newest release's unless told). Put its directory
on the child's ``PYTHONPATH``."""

import os
import textwrap

from tests import nova_releases

DRIVER = '''
class LibvirtDriver:
    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        pass
'''
EXISTING_XML = '''
    def _get_existing_domain_xml(self, instance, network_info,
                                 block_device_info=None):
        pass
'''
MIGRATION = '''
def get_updated_guest_xml(instance, guest, migrate_data, get_volume_config,
                          get_vif_config=None, new_resources=None):
    pass
'''


def make(top, version=None, lacking=(), broken=None):
    """nova ``version`` (None: the newest release's) under ``top``.
    ``lacking``: names left out (``_get_existing_domain_xml``,
    ``get_updated_guest_xml``);
    ``broken``: the driver module raises this text as an ImportError."""
    version = version or nova_releases.newest().nova

    def put(rel, text):
        path = os.path.join(top, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(textwrap.dedent(text))
    for pkg in ('nova', 'nova/virt', 'nova/virt/libvirt'):
        put(pkg + '/__init__.py', '')
    driver = DRIVER
    if '_get_existing_domain_xml' not in lacking:
        driver += EXISTING_XML
    if broken:
        driver = 'raise ImportError(%r)\n' % broken
    put('nova/virt/libvirt/driver.py', driver)
    put('nova/virt/libvirt/migration.py',
        '' if 'get_updated_guest_xml' in lacking else MIGRATION)
    put('nova-%s.dist-info/METADATA' % version,
        'Metadata-Version: 2.1\nName: nova\nVersion: %s\n' % version)
    put('nova-%s.dist-info/RECORD' % version, '')
    return top
