"""``nova-pinning status`` of an arrived guest (issue 61): its home node,
home source (``arrived``) and mode, in the table and the JSON."""

import json

from tests.unit.cmd import test_cli_live
from tests.unit import hosts

MIB = 1024
VM_2S = hosts.capabilities([[[0, 1], [2, 3]], [[4, 5], [6, 7]]],
                           memory_kib=1024 * MIB)


class TestStatusOfAnArrival(test_cli_live.LiveCliTestCase):

    def setUp(self):
        super().setUp()
        # The 2-socket VM's topology, one guest migrated in: most of its
        # memory on node 1, the rest where the copy ran on node 0.
        self.fake.capabilities, self.fake.ncpus = VM_2S, 8
        for uuid in list(self.fake.domains):
            del self.fake.domains[uuid]
        x = self.fake.add_domain(
            'x', 2, xml=hosts.domain_xml('x', 2, memory_kib=256 * MIB),
            memory_by_node_kib={'0': 100 * MIB, '1': 156 * MIB})
        x.arrived = True

    def test_table_and_json(self):
        code, out, err = self.run_cli('rebind')
        self.assertEqual(0, code, err)
        code, out, err = self.run_cli('status', '--interval', '0')
        line = [x for x in out.splitlines() if x.split()[1:2] == ['x']]
        self.assertEqual(1, len(line), out)
        self.assertIn('1(arrived)', line[0])
        self.assertIn('dedicated', line[0])
        code, out, err = self.run_cli('status', '--interval', '0',
                                      '--format', 'json')
        guest, = [g for g in json.loads(out)['guests'] if g['name'] == 'x']
        self.assertEqual(('dedicated', 1, 'arrived'),
                         (guest['mode'], guest['home_node'],
                          guest['home_source']))
