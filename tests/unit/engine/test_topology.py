import testtools

from nova_pinning_hooks.engine import topology
from tests.unit import hosts


def host(name):
    return topology.HostTopology.from_capabilities(hosts.load(name))


class TestNamedHosts(testtools.TestCase):

    # name: (online CPUs, nodes, CPUs per node, threads per core)
    EXPECTED = {
        'small-1node': (4, 1, [4], {1}),
        'intel-2s-28c-ht': (112, 2, [56, 56], {2}),
        'amd-2s-64c-nps4': (256, 8, [32] * 8, {2}),
        'arm-1s-80c': (80, 1, [80], {1}),
        'this-machine': (2, 1, [2], {1}),
        'offline-cpus': (13, 2, [6, 7], {1, 2}),
        'uneven-nodes': (12, 2, [8, 4], {1}),
        'memory-only-node': (16, 3, [8, 8, 0], {2}),
        'adjacent-siblings': (16, 2, [8, 8], {2}),
        'smt4': (32, 2, [16, 16], {4}),
    }

    def test_every_named_host(self):
        self.assertEqual(set(hosts.ALL), set(self.EXPECTED))
        for name, (ncpus, nnodes, per_node, threads) in self.EXPECTED.items():
            h = host(name)
            self.assertEqual(ncpus, len(h.cpus), name)
            self.assertEqual(nnodes, len(h.nodes), name)
            self.assertEqual(per_node, [len(n.cpus) for n in h.nodes.values()],
                             name)
            self.assertEqual(threads, {len(h.core_of[c]) for c in h.cpus},
                             name)

    def test_cores_partition_each_node(self):
        for name in hosts.ALL:
            h = host(name)
            for node in h.nodes.values():
                cores = h.cores(node.cpus)
                union = frozenset().union(*cores) if cores else frozenset()
                self.assertEqual(node.cpus, union, name)
                self.assertEqual(len(node.cpus), sum(len(c) for c in cores))

    def test_intel_siblings(self):
        h = host('intel-2s-28c-ht')
        self.assertEqual(frozenset({4, 60}), h.core_of[4])
        self.assertEqual(1, h.node_of[84])

    def test_adjacent_siblings(self):
        h = host('adjacent-siblings')
        self.assertEqual(frozenset({6, 7}), h.core_of[7])

    def test_offline_cpus_dropped_everywhere(self):
        h = host('offline-cpus')
        self.assertNotIn(3, h.cpus)
        # CPU 3's sibling is 11: both offline; 5's sibling 13 is offline.
        self.assertEqual(frozenset({5}), h.core_of[5])
        for core in h.core_of.values():
            self.assertFalse(core & {3, 11, 13})

    def test_memory_only_node(self):
        h = host('memory-only-node')
        self.assertEqual(frozenset(), h.nodes[2].cpus)
        self.assertEqual(16 * 1024 * 1024, h.nodes[2].memory_kib)

    def test_memory_units(self):
        h = host('intel-2s-28c-ht')
        self.assertEqual(234881024, h.nodes[0].memory_kib)


class TestBadCapabilities(testtools.TestCase):

    CASES = [
        ('<capabilities', 'malformed'),
        ('<capabilities><host/></capabilities>', 'no <host><topology>'),
        (hosts.capabilities([[[0]]], offline=(0,)), 'no online CPU'),
        ("<capabilities><host><topology><cells><cell id='x'/></cells>"
         "</topology></host></capabilities>", 'numeric id'),
        ("<capabilities><host><topology><cells><cell id='0'><cpus>"
         "<cpu id='0' siblings='0,1'/><cpu id='1' siblings='1'/></cpus>"
         "</cell></cells></topology></host></capabilities>", 'disagree'),
        ("<capabilities><host><topology><cells><cell id='0'><cpus>"
         "<cpu id='0' siblings='0'/></cpus></cell><cell id='1'><cpus>"
         "<cpu id='0' siblings='0'/></cpus></cell></cells></topology>"
         "</host></capabilities>", 'two cells'),
        (None, 'XML text'),
    ]

    def test_errors_are_clear(self):
        for xml, fragment in self.CASES:
            exc = self.assertRaises(topology.TopologyError,
                                    topology.HostTopology.from_capabilities,
                                    xml)
            self.assertIn(fragment, str(exc))
