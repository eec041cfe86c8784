"""Our pins out of a live migration's destination XML; nova's in."""

import testtools

from nova_pinning_hooks import migratexml

NOVA_GUEST = """<domain type='kvm'>
  <name>instance-00000001</name>
  <uuid>6f0b5e4e-0000-4000-8000-000000000001</uuid>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:name>vm1</nova:name>
    </nova:instance>
  </metadata>
  <memory unit='KiB'>1048576</memory>
  <vcpu placement='static' cpuset='2-7'>2</vcpu>
  <cputune>
    <shares>2048</shares>
    <vcpupin vcpu='0' cpuset='100'/>
    <vcpupin vcpu='1' cpuset='101'/>
    <emulatorpin cpuset='100-101'/>
    <iothreadpin iothread='1' cpuset='100-101'/>
  </cputune>
  <numatune>
    <memory mode='strict' nodeset='1'/>
  </numatune>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices>
    <disk type='file' device='disk'><source file='/dst/disk'/></disk>
  </devices>
</domain>
"""

NUMA = NOVA_GUEST.replace(
    '<os>', "<cpu><numa><cell id='0' cpus='0-1' memory='1048576'/></numa>"
    "</cpu>\n  <os>")


class TestStrip(testtools.TestCase):

    def test_our_pins_go_nova_changes_stay(self):
        text, removed = migratexml.strip_pins(NOVA_GUEST)
        self.assertEqual(5, removed)
        for gone in ('vcpupin', 'emulatorpin', 'iothreadpin', 'numatune'):
            self.assertNotIn(gone, text)
        # Everything else byte for byte: the disk nova rewrote, the
        # vCPU cpuset nova set, nova's shares, its metadata namespace.
        expected = NOVA_GUEST
        for line in ("    <vcpupin vcpu='0' cpuset='100'/>\n",
                     "    <vcpupin vcpu='1' cpuset='101'/>\n",
                     "    <emulatorpin cpuset='100-101'/>\n",
                     "    <iothreadpin iothread='1' cpuset='100-101'/>\n",
                     "  <numatune>\n    <memory mode='strict' "
                     "nodeset='1'/>\n  </numatune>\n"):
            expected = expected.replace(line, '')
        self.assertEqual(expected, text)

    def test_table(self):
        only_pins = NOVA_GUEST.replace('    <shares>2048</shares>\n', '')
        cases = [
            ('nova-placed guest: nova rewrote them', NUMA, NUMA, 0),
            ('cputune left empty goes', only_pins, None, 5),
            ('no pins: unchanged', NOVA_GUEST.replace(
                NOVA_GUEST[NOVA_GUEST.index('  <cputune>'):
                           NOVA_GUEST.index('  <os>')], ''), None, 0),
            ('one line XML', NOVA_GUEST.replace('\n', ''), None, 5),
        ]
        for label, xml, want, n in cases:
            text, removed = migratexml.strip_pins(xml)
            self.assertEqual(n, removed, label)
            if want is not None:
                self.assertEqual(want, text, label)
            self.assertNotIn('vcpupin', text if n else '', label)
        text, _ = migratexml.strip_pins(only_pins)
        self.assertNotIn('cputune', text)

    def test_not_a_domain(self):
        for bad in ('<domain', '<network/>', None):
            self.assertRaises(migratexml.StripError, migratexml.strip_pins,
                              bad)
