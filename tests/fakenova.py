"""A fake nova distribution on disk, for the child Python that
``nova-pinning-status upgrade check`` asks (``nova.compatprobe``): just
the names ``nova.compat`` looks for, in the shapes nova 29 to 34 have
them, and the distribution's metadata (its version). Put its directory
on the child's ``PYTHONPATH``."""

import os
import textwrap

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


def make(top, version='34.0.0', lacking=(), broken=None):
    """nova ``version`` under ``top``. ``lacking``: names left out
    (``_get_existing_domain_xml``, ``get_updated_guest_xml``);
    ``broken``: the driver module raises this text as an ImportError."""
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
