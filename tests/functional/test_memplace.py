"""Memory placement of a real guest from its memory cgroup agrees with
numa_maps (the page walk it replaces)."""

from nova_pinning_hooks.host import memplace
from nova_pinning_hooks.host import virtread
from tests.functional import base


class TestMemplace(base.FunctionalTestCase):

    def test_cgroup_and_numa_maps_agree(self):
        dom = self.boot('mem')
        pid = self.pid(dom)
        directory, layout = memplace.cgroup_dir(pid)
        self.assertIsNotNone(directory, 'no memory cgroup for qemu')
        self.assertIn('qemu', directory)  # the guest's own, libvirt's
        from_cgroup = memplace.from_cgroup(pid)
        walked = virtread.read_memory_by_node(pid)
        self.assertEqual(set(walked), set(from_cgroup))
        for node, kib in walked.items():
            # The cgroup also counts qemu's own anonymous memory outside
            # its mappings' walk (page tables, kernel side): within 25 %
            # or 16 MiB of each other.
            self.assertLess(abs(from_cgroup[node] - kib),
                            max(kib // 4, 16384), (node, from_cgroup, walked))
