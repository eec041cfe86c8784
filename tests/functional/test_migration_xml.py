"""The live migration failure on the real libvirtd, and the filter.

A guest's migratable XML (what nova starts a live migration's
destination XML from) carries our live pins. Rendered as it would come
from a larger source host (pins to CPU 100) and started here, on a host
without CPU 100, libvirt refuses it: the destination's side of a failed
live migration. With ``migratexml.strip_pins`` it starts, and a pass
binds it.
"""

import re
import uuid

from nova_pinning_hooks.engine import migratexml
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from tests.functional import base


class TestMigrationXml(base.FunctionalTestCase):

    def destination_xml(self, dom, name):
        xml = dom.XMLDesc(self.libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        self.assertIn('<vcpupin', xml)  # our live pins are in it
        # As it would come from a source host with CPU 100.
        xml = re.sub(r"cpuset='[0-9,-]+'", "cpuset='100'", xml)
        xml = re.sub(r'<name>[^<]+</name>', '<name>%s</name>' % name, xml)
        return re.sub(r'<uuid>[^<]+</uuid>',
                      '<uuid>%s</uuid>' % uuid.uuid4(), xml)

    def test_pins_the_destination_lacks_fail_and_stripped_ones_start(self):
        dom = self.boot('src')
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(rec.close)
        self.assertIsNone(rec.run_pass().error)
        name = base.PREFIX + 'dst'
        self.addCleanup(self._destroy, name)
        xml = self.destination_xml(dom, name)

        exc = self.assertRaises(self.libvirt.libvirtError,
                                self.conn.createXML, xml, 0)
        self.assertIn('Numerical result out of range', str(exc))

        stripped, removed = migratexml.strip_pins(xml)
        self.assertGreaterEqual(removed, 2)  # vcpupin and emulatorpin
        moved = self.conn.createXML(stripped, 0)
        self.assertTrue(moved.isActive())
        self.assertIsNone(rec.run_pass().error)
        self.assertEqual(1, len(self.libvirt_pins(moved)[0]))
