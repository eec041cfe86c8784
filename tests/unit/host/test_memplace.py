"""Memory placement from the memory cgroup (v1 and v2), with the
numa_maps fallback, on a fake /proc and /sys/fs/cgroup."""

import os

import fixtures
import testtools

from nova_pinning_hooks.host import memplace

V1_STAT = """total=3000 N0=1000 N1=2000
file=500 N0=500 N1=0
anon=2500 N0=500 N1=2000
unevictable=0 N0=0 N1=0
hierarchical_total=3000 N0=1000 N1=2000
hierarchical_anon=2500 N0=500 N1=2000
"""
V2_STAT = """anon N0=2097152 N1=1048576
file N0=4096 N1=0
kernel_stack N0=16384 N1=0
"""
SCOPE = '/machine/qemu-1-g.libvirt-qemu'


class TestMemplace(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.top = self.useFixture(fixtures.TempDir()).path
        self.proc = os.path.join(self.top, 'proc')
        self.root = os.path.join(self.top, 'cgroup')

    def write(self, path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)

    def process(self, cgroup_lines, pid=7):
        self.write(os.path.join(self.proc, str(pid), 'cgroup'),
                   ''.join(line + '\n' for line in cgroup_lines))
        return pid

    def test_v1(self):
        pid = self.process(['12:cpuset:' + SCOPE, '5:memory:' + SCOPE,
                            '0::/'])
        self.write(os.path.join(self.root, 'memory', SCOPE.lstrip('/'),
                                'memory.numa_stat'), V1_STAT)
        page = os.sysconf('SC_PAGE_SIZE') // 1024
        self.assertEqual({'0': 500 * page, '1': 2000 * page},
                         memplace.from_cgroup(pid, self.proc, self.root))

    def test_v2(self):
        pid = self.process(['0::/machine.slice/machine-qemu.scope'])
        self.write(os.path.join(self.root, 'machine.slice',
                                'machine-qemu.scope', 'memory.numa_stat'),
                   V2_STAT)
        self.assertEqual({'0': 2048, '1': 1024},
                         memplace.from_cgroup(pid, self.proc, self.root))

    def test_v2_libvirt_threaded_cgroups(self):
        # What libvirt 9.0 made on the 2-node VM (tests/vm): qemu in a
        # threaded cgroup with no memory controller; the memory is the
        # threaded domain's, and nothing above it is read.
        scope = os.path.join(self.root, 'machine.slice',
                             r'machine-qemu\x2d1\x2dg1.scope')
        pid = self.process(['0::/machine.slice/machine-qemu\\x2d1\\x2dg1.scope'
                            '/libvirt/emulator'])
        self.write(os.path.join(scope, 'cgroup.type'), 'domain\n')
        self.write(os.path.join(scope, 'memory.numa_stat'),
                   'anon N0=1 N1=1\n')
        self.write(os.path.join(scope, 'libvirt', 'cgroup.type'),
                   'domain threaded\n')
        self.write(os.path.join(scope, 'libvirt', 'memory.numa_stat'),
                   V2_STAT)
        for child in ('emulator', 'vcpu0'):
            self.write(os.path.join(scope, 'libvirt', child, 'cgroup.type'),
                       'threaded\n')
        self.assertEqual({'0': 2048, '1': 1024},
                         memplace.from_cgroup(pid, self.proc, self.root))

    def test_v2_threaded_without_a_domain_below_the_root(self):
        pid = self.process(['0::/t'])
        self.write(os.path.join(self.root, 't', 'cgroup.type'),
                   'threaded\n')
        self.write(os.path.join(self.root, 'cgroup.type'), 'threaded\n')
        self.write(os.path.join(self.root, 'memory.numa_stat'), V2_STAT)
        self.assertIsNone(memplace.from_cgroup(pid, self.proc, self.root))

    def test_falls_back_to_numa_maps(self):
        walked = []

        def numa_maps(pid):
            walked.append(pid)
            return {'0': 4}
        cases = [
            ('no cgroup file', None, None),
            ('no memory controller', ['3:cpu:/x'], None),
            ('dotdot path', ['5:memory:/../../etc'], None),
            ('no numa_stat file', ['5:memory:/gone'], None),
            ('no anonymous memory (hugetlbfs)', ['5:memory:/huge'],
             'anon=0 N0=0\n'),
            ('garbage', ['5:memory:/bad'], 'anon=x N0=\u0661\n'),
        ]
        for i, (label, lines, stat) in enumerate(cases):
            pid = 100 + i
            if lines is not None:
                self.process(lines, pid)
            if stat is not None:
                self.write(os.path.join(self.root, 'memory',
                                        lines[0].split(':')[2].lstrip('/'),
                                        'memory.numa_stat'), stat)
            self.assertEqual({'0': 4}, memplace.memory_by_node(
                pid, self.proc, self.root, fallback=numa_maps), label)
        self.assertEqual(len(cases), len(walked))

    def test_a_fifo_is_not_read(self):
        pid = self.process(['5:memory:/f'])
        d = os.path.join(self.root, 'memory', 'f')
        os.makedirs(d)
        os.mkfifo(os.path.join(d, 'memory.numa_stat'))
        self.assertIsNone(memplace.from_cgroup(pid, self.proc, self.root))
