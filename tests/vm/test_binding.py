"""Binding on a real 2-socket SMT host with cgroup v2 (the VM).

The host: CPUs 0-3 on node 0, 4-7 on node 1, siblings (0,1) (2,3)
(4,5) (6,7); reserved 0-1, so the pool is 2-3 on node 0 and 4-7 on
node 1, ratio 4. Guests are TCG guests whose memory libvirt keeps on
one node (``<numatune>`` strict), so their home node comes from where
their memory is. Every placement is checked in the kernel: each vCPU
thread's ``Cpus_allowed_list`` and the v2 cpusets of libvirt's vCPU
cgroups, not only in libvirt.
"""

import json
import os
import re

from nova_pinning_hooks.engine import cpuset
from tests.vm import base
from tests.vm import machine


def _changes(result):
    """(changes, writes) from a rebind's summary line."""
    m = re.search(r'(\d+) changes, .* (\d+) writes', result.out)
    return int(m.group(1)), int(m.group(2))


class TestBinding(base.VMTestCase):

    def assert_one_to_one_on_a_whole_core(self, view, node):
        """Each vCPU on one CPU of its own; the guest's CPUs are whole
        cores of ``node``; the v2 cgroup cpusets say the same."""
        cpus = [cpuset.parse(a) for a in view['vcpus'].values()]
        self.assertTrue(all(len(c) == 1 for c in cpus), view)
        held = frozenset().union(*cpus)
        self.assertEqual(len(cpus), len(held), view)
        self.assertTrue(held <= machine.NODES[node], (node, view))
        for core in machine.SIBLINGS:
            self.assertIn(len(core & held), (0, 2), (
                'half a core', view))
        self.assert_cgroups_agree(view)
        return held

    def assert_cgroups_agree(self, view):
        for vcpu, allowed in view['vcpus'].items():
            self.assertEqual(
                cpuset.parse(allowed),
                cpuset.parse(view['cpusets']['vcpu' + vcpu]['cpus']),
                view)
        union = frozenset().union(*(cpuset.parse(a)
                                    for a in view['vcpus'].values()))
        self.assertEqual(
            union, cpuset.parse(view['cpusets']['emulator']['cpus']), view)
        self.assertEqual([cpuset.format(union)], view['emulator'], view)

    def test_one_to_one_then_node_range_then_host_range(self):
        a = self.create_guest('a', 2, node=1)
        b = self.create_guest('b', 2, node=0)
        changes, writes = _changes(self.np('rebind'))
        self.assertEqual((6, 6), (changes, writes))
        k = self.kernel(a, b)
        held_a = self.assert_one_to_one_on_a_whole_core(k[a], node=1)
        self.assertEqual({2, 3}, self.assert_one_to_one_on_a_whole_core(
            k[b], node=0))
        plan = self.planned()
        self.assertEqual(
            {a: ('dedicated', 1, 'memory'), b: ('dedicated', 0, 'memory')},
            {n: (plan[n]['mode'], plan[n]['home_node'],
                 plan[n]['home_source']) for n in (a, b)})
        # libvirt reports one L3 bank per socket here (0-3, 4-7).
        self.assertEqual({a: ['4-7'], b: ['0-3']},
                         {n: plan[n]['l3_domains'] for n in (a, b)})
        # A second pass with nothing changed writes nothing.
        self.assertEqual((0, 0), _changes(self.np('rebind')))

        # Node 1 fills one-to-one: the new guest takes the other whole
        # core, the first one keeps its CPUs.
        d = self.create_guest('d', 2, node=1)
        self.np('rebind')
        k = self.kernel(a, b, d)
        self.assertEqual(held_a, self.assert_one_to_one_on_a_whole_core(
            k[a], node=1))
        held_d = self.assert_one_to_one_on_a_whole_core(k[d], node=1)
        self.assertFalse(held_a & held_d)

        # Node 0 overflows its 2-CPU pool: a node range there, node 1
        # stays one-to-one.
        c = self.create_guest('c', 2, node=0)
        self.np('rebind')
        k = self.kernel(a, b, c, d)
        for name in (b, c):
            self.assertEqual({'0': '2-3', '1': '2-3'}, k[name]['vcpus'])
            self.assert_cgroups_agree(k[name])
        self.assertEqual(held_a, self.assert_one_to_one_on_a_whole_core(
            k[a], node=1))
        plan = self.planned()
        self.assertEqual(('node-range', 'node-range', 'dedicated'),
                         (plan[b]['mode'], plan[c]['mode'], plan[a]['mode']))
        self.assertEqual((0, 0), _changes(self.np('rebind')))

        # With a ratio of 1, node 0's 4 vCPUs exceed its allocatable 2:
        # every managed guest on the whole pool.
        tight = self.conf_with('/root/ratio1.conf', 'allocation_ratio = 4.0',
                               'allocation_ratio = 1.0')
        self.np('rebind', conf=tight)
        k = self.kernel(a, b, c, d)
        for name in (a, b, c, d):
            self.assertEqual({'0': '2-7', '1': '2-7'}, k[name]['vcpus'],
                             name)
            self.assert_cgroups_agree(k[name])
        self.assertEqual({'host-range'}, {
            g['mode'] for g in self.planned(conf=tight).values()})
        self.assertEqual((0, 0), _changes(self.np('rebind', conf=tight)))

    def test_drift_in_libvirt_and_in_the_v2_cgroup_is_repaired(self):
        e = self.create_guest('e', 1, node=1)
        self.np('rebind')
        pinned = self.kernel(e)[e]['vcpus']['0']

        # By hand through libvirt, onto a reserved CPU: status says so,
        # the next pass puts it back. (A hand pin onto a free CPU of the
        # pool is kept: one-to-one placement is sticky while valid.)
        self.sh(['virsh', '-q', '-c', 'qemu:///system', 'vcpupin', e, '0',
                 '0', '--live'])
        self.assertEqual('0', self.kernel(e)[e]['vcpus']['0'])
        self.assertFalse(self.planned()[e]['live_matches_plan'])
        self.np('rebind')
        pinned = self.kernel(e)[e]['vcpus']['0']
        self.assertIn(int(pinned), machine.NODES[1] - {0, 1})
        self.assertEqual(pinned, self.planned()[e]['vcpu_pins']['0'])

        # By hand in the kernel (the vCPU's v2 cgroup and its thread's
        # affinity), behind libvirt's back: libvirt still says the pin,
        # the kernel does not. (Kernel 6.1 widens the thread with its
        # cgroup; 6.12, Debian 13's, keeps the affinity a thread asked
        # for when its cpuset widens: taskset does it there.)
        view = self.kernel(e)[e]
        vcpu0 = '/sys/fs/cgroup%s/../vcpu0' % view['cgroup']
        self.sh(['sh', '-c', 'echo 2-7 > "$1/cpuset.cpus" && '
                 'for t in $(cat "$1/cgroup.threads"); do '
                 'taskset -pc 2-7 "$t" >/dev/null; done', 'set', vcpu0])
        self.assertEqual('2-7', self.kernel(e)[e]['vcpus']['0'])
        entry = self.planned()[e]
        self.assertEqual({'0': {'libvirt': pinned, 'kernel': '2-7'}},
                         entry['kernel_drift'])
        self.assertEqual((1, 1), _changes(self.np('rebind')))
        view = self.kernel(e)[e]
        self.assertEqual(pinned, view['vcpus']['0'])
        self.assertEqual(pinned, view['cpusets']['vcpu0']['cpus'])
        self.assertEqual({}, self.planned()[e]['kernel_drift'])

    def test_memory_placement_from_v2_numa_stat_agrees_with_numa_maps(self):
        names = {self.create_guest('m0', 1, node=0, mib=128): '0',
                 self.create_guest('m1', 1, node=1, mib=128): '1'}
        k = self.kernel(*names)
        # The package's figure (the cgroup's) read between two readings
        # of numa_maps, in one process: a young qemu under TCG still
        # grows (its translated code is anonymous memory), by megabytes
        # between two readings seconds apart (CI once saw the cgroup's
        # 27,556 KiB against numa_maps' 20,024 read before it).
        code = ('import json, sys\n'
                'sys.path.insert(0, %r)\n'
                'import probe\n'
                'from nova_pinning_hooks.host import memplace\n'
                'out = {}\n'
                'for p in sys.argv[1:]:\n'
                '    before = probe._numa_maps(int(p))\n'
                '    cgroup = memplace.from_cgroup(int(p))\n'
                '    out[p] = (before, cgroup, probe._numa_maps(int(p)))\n'
                'print(json.dumps(out))\n' % os.path.dirname(base.PROBE))
        pids = [str(k[n]['pid']) for n in names]
        read = json.loads(self.sh(['python3', '-c', code] + pids).out)
        for name, node in names.items():
            before, cgroup, after = read[str(k[name]['pid'])]
            # Read from the cgroup, not the numa_maps fallback.
            self.assertIsNotNone(cgroup, name)
            seen = (name, before, cgroup, after)
            self.assertEqual([node], sorted(cgroup), seen)
            # numa_maps also counts what qemu allocated before libvirt
            # moved it into the guest's cgroup (charged elsewhere, and
            # not yet under the guest's memory policy): a small part.
            self.assertGreater(after[node], 0.8 * sum(after.values()), seen)
            low = min(before[node], after[node])
            high = max(before[node], after[node])
            self.assertGreater(cgroup[node], 0.8 * low, seen)
            self.assertLess(cgroup[node], 1.2 * high, seen)
        plan = self.planned()
        self.assertEqual(
            {n: (int(node), 'memory') for n, node in names.items()},
            {n: (plan[n]['home_node'], plan[n]['home_source'])
             for n in names})
