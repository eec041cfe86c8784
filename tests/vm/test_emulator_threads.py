"""Emulator and I/O threads of one-to-one guests on the 2-node SMT host.

The host: CPUs 0-3 on node 0, 4-7 on node 1, siblings (0,1) (2,3) (4,5)
(6,7); reserved 0-1, so the pool is 2-3 on node 0 and 4-7 on node 1,
ratio 4. ``io`` (2 vCPUs and an IOThread) and ``o`` (1 vCPU) are homed
on node 1, ``n`` (1 vCPU, an IOThread) on node 0: all one-to-one. With
``[nova_pinning] emulator_threads = shared`` each guest's emulator
thread and IOThread run on its home node's pool CPUs that no one-to-one
vCPU holds, and on the node's whole pool once a fourth guest fills node
1; with ``guest`` they are on the guest's own vCPUs' CPUs. Every
placement is read in the kernel: the ``Cpus_allowed_list`` of qemu's
main thread, of the IOThread (its thread id from QMP query-iothreads),
of every other non-vCPU thread, and libvirt's v2 cgroup cpusets.
"""

import json
import re

from nova_pinning_hooks.engine import cpuset
from tests.vm import base
from tests.vm import machine

GUEST_XML = """<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>64</memory>
  <vcpu>{vcpus}</vcpu>
  <iothreads>1</iothreads>
  <numatune><memory mode='strict' nodeset='{node}'/></numatune>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices>
</domain>"""
POOL = {0: frozenset({2, 3}), 1: frozenset({4, 5, 6, 7})}


def _changes(result):
    """(changes, writes) from a rebind's summary line."""
    m = re.search(r'(\d+) changes, .* (\d+) writes', result.out)
    return int(m.group(1)), int(m.group(2))


class TestEmulatorThreads(base.VMTestCase):

    def create(self, name, vcpus, node):
        name = base.PREFIX + name
        path = '/root/%s.xml' % name
        self.vm.write(path, GUEST_XML.format(name=name, vcpus=vcpus,
                                             node=node))
        self.vm.run(['virsh', '-q', '-c', 'qemu:///system', 'create', path],
                    timeout=180)
        return name

    def threads(self, *names):
        """name -> (vCPU CPUs, main thread's, IOThread's, every other
        non-vCPU thread's, emulator cgroup's, iothread1 cgroup's)."""
        k = self.kernel(*names)
        result = {}
        for name in names:
            view = k[name]
            reply = json.loads(self.sh([
                'virsh', '-c', 'qemu:///system', 'qemu-monitor-command',
                name, '{"execute":"query-iothreads"}']).out)
            tid, = [t['thread-id'] for t in reply['return']]
            pid = view['pid']
            status = self.sh(['cat', '/proc/%d/status' % pid,
                              '/proc/%d/task/%d/status' % (pid, tid)]).out
            main, io = [cpuset.parse(line.split(':', 1)[1].strip())
                        for line in status.splitlines()
                        if line.startswith('Cpus_allowed_list:')]
            result[name] = (
                frozenset().union(*(cpuset.parse(c)
                                    for c in view['vcpus'].values())),
                main, io,
                frozenset(cpuset.parse(c) for c in view['emulator']),
                cpuset.parse(view['cpusets']['emulator']['cpus']),
                cpuset.parse(view['cpusets']['iothread1']['cpus']))
        return result

    def assert_apart(self, seen, name, expected):
        """``name``'s emulator and I/O threads all on ``expected``, in
        each thread and in the cgroups."""
        _, main, io, others, cg_emu, cg_io = seen[name]
        self.assertEqual((expected,) * 4 + (frozenset({expected}),),
                         (main, io, cg_emu, cg_io, others), (name, seen))

    def test_shared_then_full_node_then_guest(self):
        shared = self.conf_with('/root/shared.conf',
                                'emulator_threads = guest',
                                'emulator_threads = shared')
        io = self.create('io', 2, node=1)
        o = self.create('o', 1, node=1)
        n = self.create('n', 1, node=0)
        first = _changes(self.np('rebind', conf=shared))
        seen = self.threads(io, o, n)
        plan = self.planned(conf=shared)
        self.assertEqual(dict.fromkeys((io, o, n), ('dedicated',
                                                    'pool-free')),
                         {g: (plan[g]['mode'],
                              plan[g]['emulator_threads']['rule'])
                          for g in (io, o, n)})
        held1 = seen[io][0] | seen[o][0]
        self.assertEqual(3, len(held1))
        self.assertLessEqual(held1, machine.NODES[1])
        free1 = POOL[1] - held1
        free0 = POOL[0] - seen[n][0]
        self.assertEqual((1, 1), (len(free1), len(free0)))
        for name, free in ((io, free1), (o, free1), (n, free0)):
            self.assert_apart(seen, name, free)
            self.assertEqual(cpuset.format(free),
                             plan[name]['emulator_pin'], name)
        # A second pass with nothing changed writes nothing.
        self.assertGreater(first[1], 0)
        self.assertEqual((0, 0), _changes(self.np('rebind', conf=shared)))

        # A fourth one-to-one guest fills node 1's pool: no CPU there is
        # free of one-to-one vCPUs, so node 1's guests' emulator and I/O
        # threads float over its whole pool; node 0's stay where they are.
        f = self.create('f', 1, node=1)
        self.np('rebind', conf=shared)
        seen = self.threads(io, o, n, f)
        plan = self.planned(conf=shared)
        self.assertEqual(POOL[1], seen[io][0] | seen[o][0] | seen[f][0])
        for name in (io, o, f):
            self.assertEqual('node-pool-fallback',
                             plan[name]['emulator_threads']['rule'], name)
            self.assert_apart(seen, name, POOL[1])
        self.assert_apart(seen, n, free0)
        self.assertEqual((0, 0), _changes(self.np('rebind', conf=shared)))

        # emulator_threads = guest (the base configuration's): each guest's
        # emulator and I/O threads on its own vCPUs' CPUs; no vCPU moves.
        vcpus = {g: seen[g][0] for g in (io, o, n, f)}
        self.np('rebind')
        seen = self.threads(io, o, n, f)
        for name in (io, o, n, f):
            self.assertEqual(vcpus[name], seen[name][0], name)
            self.assert_apart(seen, name, vcpus[name])
        plan = self.planned()
        self.assertNotIn('emulator_threads', plan[io])
        self.assertEqual((0, 0), _changes(self.np('rebind')))
