import testtools

from nova_pinning_hooks.engine import guest
from tests.unit import hosts


class TestGuestFromXml(testtools.TestCase):

    def test_plain_nova_guest(self):
        g = guest.Guest.from_xml(hosts.domain_xml('g1', 4, uuid='u1'),
                                 memory_by_node_kib={'1': 2048, '0': 0})
        self.assertEqual(('u1', 'g1', (0, 1, 2, 3)), (g.uuid, g.name,
                                                      g.vcpus))
        self.assertTrue(g.nova)
        self.assertFalse(g.nova_placed)
        self.assertIsNone(g.vcpu_pin(0))
        self.assertEqual({1: 2048}, g.memory_by_node_kib)
        self.assertEqual(1048576, g.memory_kib)

    def test_pins_and_emulator(self):
        g = guest.Guest.from_xml(hosts.domain_xml(
            'g', 2, pins={0: '4', 1: '4-5'}, emulator='4-5'))
        self.assertEqual(frozenset({4}), g.vcpu_pin(0))
        self.assertEqual(frozenset({4, 5}), g.vcpu_pin(1))
        self.assertEqual(frozenset({4, 5}), g.emulator_pin)
        self.assertEqual(frozenset({4}), g.exclusive_cpus())

    def test_our_one_to_one_pins_do_not_make_it_nova_placed(self):
        g = guest.Guest.from_xml(hosts.domain_xml(
            'g', 2, pins={0: '4', 1: '5'}, emulator='4-5'))
        self.assertFalse(g.nova_placed)

    def test_instance_numa_topology_is_nova_placed(self):
        g = guest.Guest.from_xml(hosts.domain_xml('g', 2, numa_cells=True))
        self.assertTrue(g.nova_placed)

    def test_foreign_domain(self):
        g = guest.Guest.from_xml(hosts.domain_xml('g', 1, nova=False))
        self.assertFalse(g.nova)

    def test_current_vcpus_only(self):
        g = guest.Guest.from_xml(hosts.domain_xml('g', 8, current=3))
        self.assertEqual((0, 1, 2), g.vcpus)

    def test_vcpus_element_lists_online(self):
        xml = hosts.domain_xml('g', 4).replace(
            '</domain>', "<vcpus><vcpu id='0' enabled='yes'/><vcpu id='1' "
            "enabled='no'/><vcpu id='2' enabled='yes'/><vcpu id='3' "
            "enabled='no'/></vcpus></domain>")
        self.assertEqual((0, 2), guest.Guest.from_xml(xml).vcpus)

    def test_default_cpuset(self):
        xml = hosts.domain_xml('g', 2).replace(
            "placement='static'>", "placement='static' cpuset='2-3'>")
        g = guest.Guest.from_xml(xml)
        self.assertEqual(frozenset({2, 3}), g.vcpu_pin(1))

    def test_iothreads_and_numatune(self):
        g = guest.Guest.from_xml(hosts.domain_xml('g', 2, iothreads=2,
                                                  numatune='1'))
        self.assertEqual({1: None, 2: None}, g.iothread_pins)
        self.assertEqual(('strict', frozenset({1})),
                         (g.numa_mode, g.numa_nodeset))

    def test_bad_xml(self):
        for xml, fragment in [('<domain', 'malformed'),
                              ('<network/>', 'expected <domain>'),
                              ('<domain><name>x</name></domain>', 'uuid'),
                              ('<domain><name>x</name><uuid>u</uuid>'
                               '</domain>', 'no <vcpu>'),
                              (hosts.domain_xml('g', 1, pins={0: 'x'}),
                               'domain g')]:
            exc = self.assertRaises(guest.GuestError, guest.Guest.from_xml,
                                    xml)
            self.assertIn(fragment, str(exc))

    def test_bad_memory_map(self):
        self.assertRaises(guest.GuestError, guest.Guest.from_xml,
                          hosts.domain_xml('g', 1),
                          memory_by_node_kib={'x': 1})


class TestHeadParsing(testtools.TestCase):
    """Parsing stops at <devices> only when that loses nothing."""

    def test_devices_skipped_same_result(self):
        xml = hosts.domain_xml('g', 2, pins={0: '1', 1: '2'}).replace(
            '</domain>', "<devices><emulator>/usr/bin/qemu</emulator>"
            "<memballoon model='virtio'/></devices></domain>")
        self.assertEqual(xml.split('<devices>')[0] + '</domain>',
                         guest._head(xml))
        g = guest.Guest.from_xml(xml, from_libvirt=True)
        self.assertEqual(frozenset({2}), g.vcpu_pin(1))
        self.assertEqual(g, guest.Guest.from_xml(xml))

    def test_pins_after_devices_are_still_read(self):
        xml = ("<domain><name>g</name><uuid>u</uuid><vcpu>1</vcpu>"
               "<devices/><devices></devices><cputune><vcpupin vcpu='0' "
               "cpuset='3'/></cputune></domain>")
        self.assertEqual(xml, guest._head(xml))
        self.assertEqual(frozenset({3}), guest.Guest.from_xml(
            xml, from_libvirt=True).vcpu_pin(0))

    def test_malformed_tail_is_reported_unless_from_libvirt(self):
        xml = hosts.domain_xml('g', 1).replace(
            '</domain>', '<devices><disk></devices></domain>')
        self.assertRaises(guest.GuestError, guest.Guest.from_xml, xml)
        self.assertEqual('g', guest.Guest.from_xml(
            xml, from_libvirt=True).name)

    def test_malformed_head_is_reported(self):
        xml = '<domain><name>g</name><uuid>u<devices/></domain>'
        self.assertRaises(guest.GuestError, guest.Guest.from_xml, xml,
                          from_libvirt=True)


class TestParseMany(testtools.TestCase):

    def test_one_document_same_guests(self):
        texts = [hosts.domain_xml('g%d' % i, 1 + i) for i in range(5)]
        elements = guest.parse_many(texts)
        self.assertEqual(5, len(elements))
        self.assertEqual([guest.Guest.from_xml(t) for t in texts],
                         [guest.Guest.from_element(e) for e in elements])

    def test_doubtful_input_falls_back(self):
        good = hosts.domain_xml('g', 1)
        for bad in ('<?xml version="1.0"?>' + good, good + 'junk',
                    good + good, '<domain', 'junk' + good,
                    '<!DOCTYPE domain>' + good):
            self.assertIsNone(guest.parse_many([good, bad]), bad[:30])
