"""Reading /proc and deciding which processes may be moved."""

import os

from nova_pinning_hooks.host import procfs
from nova_pinning_hooks.isolation import classify
from tests.unit.isolation import base
from tests.unit.isolation import fakehost


class TestProcfs(base.TestCase):

    def test_comm_with_spaces_and_parentheses(self):
        proc = self.host.paths.proc
        fakehost.put(os.path.join(proc, '7', 'stat'),
                     '7 (a) b (c) R 5 0 0 0 0 64 0 0 0 0 0 0 0 0 0 0 0 0 '
                     '4242 0 0\n')
        self.assertEqual(procfs.Proc(7, 'a) b (c', 'R', 5, 64, 4242),
                         procfs.read(7, proc))

    def test_gone_or_garbled_process_is_none(self):
        proc = self.host.paths.proc
        self.assertIsNone(procfs.read(4321, proc))
        fakehost.put(os.path.join(proc, '8', 'stat'), '8 (x) S\n')
        self.assertIsNone(procfs.read(8, proc))
        self.assertIsNone(procfs.cgroups(4321, proc))

    def test_cgroups_of_comounted_and_v2_hierarchies(self):
        self.assertEqual({'cpu': '/a', 'cpuacct': '/a', '': '/x.slice'},
                         procfs._parse_cgroups('2:cpu,cpuacct:/a\n'
                                               '0::/x.slice\n'))

    def test_identity_is_pid_and_start(self):
        self.host.spawn(50, 'd', start=77)
        self.assertEqual('d', procfs.same(50, 77, self.host.paths.proc).comm)
        self.assertIsNone(procfs.same(50, 78, self.host.paths.proc))

    def test_descendants(self):
        self.host.typical()
        self.host.spawn(300, 'child', ppid=104)
        self.host.spawn(301, 'grandchild', ppid=300)
        proc = self.host.paths.proc
        self.assertEqual({300, 301}, procfs.descendants(104, proc))
        self.assertTrue(procfs.is_descendant(301, 104, proc))
        self.assertFalse(procfs.is_descendant(100, 104, proc))


class TestVerdict(base.TestCase):

    rules = classify.Rules(group='/host',
                           excluded_names=classify.comm_names(
                               ['ovs-vswitchd', 'qemu-system-x86_64']),
                           move_from=frozenset(['/']))

    def verdicts(self, rules=None):
        return {p.pid: v for p, v, _ in
                classify.scan(rules or self.rules, self.host.paths.proc)}

    def test_typical_host(self):
        self.host.typical()
        self.host.spawn(106, 'in-host-group', cgroup='/host')
        self.assertEqual({
            1: 'init', 2: 'kernel thread', 10: 'kernel thread',
            11: 'kernel thread', 100: classify.MOVABLE,
            101: 'in cpuset group /system/rsyslog',
            102: 'excluded name ovs-vswitchd',
            103: 'guest (machine cgroup)', 104: classify.MOVABLE,
            105: 'zombie', 106: classify.CONFINED}, self.verdicts())

    def test_names_match_the_kernels_truncated_comm(self):
        # comm is 15 characters: qemu-system-x86_64 shows as this.
        self.host.spawn(200, 'qemu-system-x86')
        self.assertEqual('excluded name qemu-system-x86',
                         self.verdicts()[200])

    def test_guest_in_any_machine_hierarchy(self):
        self.host.spawn(200, 'qemu-kvm', memory='/machine.slice/m.scope')
        self.assertEqual('guest (machine cgroup)', self.verdicts()[200])

    def test_threads_in_other_cpuset_groups(self):
        self.host.spawn(200, 'dpdk-app', threads={200: '/', 201: '/pinned'})
        self.host.spawn(210, 'plain', threads={210: '/', 211: '/'})
        v = self.verdicts()
        self.assertEqual('threads in other cpuset groups', v[200])
        self.assertEqual(classify.MOVABLE, v[210])

    def test_only_descendants(self):
        self.host.typical()
        self.host.spawn(300, 'child', ppid=104)
        rules = self.rules._replace(only_descendants_of=104)
        self.assertEqual({300: classify.MOVABLE}, self.verdicts(rules))
        p = procfs.read(100, self.host.paths.proc)
        self.assertEqual('not a descendant of 104',
                         classify.verdict(p, rules, self.host.paths.proc)[0])
