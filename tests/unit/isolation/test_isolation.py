"""The isolation agent on a fake /proc and cgroup tree, a fake systemctl,
and real inotify on real pid files."""

import json
import os
import shutil
import stat
import subprocess
import sys
import time

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks import overcommit
from nova_pinning_hooks.isolation import agent
from nova_pinning_hooks.isolation import backends
from nova_pinning_hooks.isolation import pidwatch
from nova_pinning_hooks.isolation import procfs


class FakeHost(fixtures.Fixture):
    """/proc, /sys/.../cpu and /sys/fs/cgroup in a temporary directory.
    Writing a pid to a fake cgroup.procs moves it, as the kernel would."""

    def _setUp(self):
        self.top = self.useFixture(fixtures.TempDir()).path
        self.proc = os.path.join(self.top, 'proc')
        self.sysfs = os.path.join(self.top, 'cpu')
        self.cgroot = os.path.join(self.top, 'cgroup')
        cpuset_root = os.path.join(self.cgroot, 'cpuset')
        for d in (self.proc, self.sysfs, cpuset_root,
                  os.path.join(cpuset_root, 'machine')):
            os.makedirs(d)
        self._put(os.path.join(self.sysfs, 'online'), '0-3\n')
        self._put(os.path.join(cpuset_root, 'cpuset.cpus'), '0-3\n')
        self._put(os.path.join(cpuset_root, 'cpuset.mems'), '0\n')
        self._put(os.path.join(self.proc, 'stat'), 'cpu 1 2 3\nbtime 1000\n')
        self.writes = []
        original = backends._write

        def kernel_write(path, value):
            self.writes.append((path, value))
            if os.path.basename(path) == 'cgroup.procs':
                if not os.path.isdir(os.path.join(self.proc, value)):
                    raise ProcessLookupError(3, 'No such process')
                rel = os.path.relpath(os.path.dirname(path), cpuset_root)
                self.set_cgroup(int(value), '/' if rel == '.' else
                                '/' + rel)
                return
            original(path, value)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.backends._write', kernel_write))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.backends._rmdir', shutil.rmtree))

    @staticmethod
    def _put(path, text):
        with open(path, 'w') as f:
            f.write(text)

    def spawn(self, pid, comm, ppid=1, flags=0, start=100, cgroup='/'):
        d = os.path.join(self.proc, str(pid))
        os.makedirs(d, exist_ok=True)
        fields = ['S', str(ppid)] + ['0'] * 4 + [str(flags)] + \
            ['0'] * 12 + [str(start)]
        self._put(os.path.join(d, 'stat'), '%d (%s) %s\n'
                  % (pid, comm, ' '.join(fields)))
        self.set_cgroup(pid, cgroup)

    def set_cgroup(self, pid, path):
        self._put(os.path.join(self.proc, str(pid), 'cgroup'),
                  '4:memory:/\n3:cpuset:%s\n0::/\n' % path)
        self._sync()

    def _sync(self):
        """Each fake cgroup's cgroup.procs lists the pids in it."""
        members = {}
        for pid in procfs.pids(self.proc):
            members.setdefault(self.cgroup(pid), []).append(str(pid))
        root = os.path.join(self.cgroot, 'cpuset')
        for d, _, _ in os.walk(root):
            rel = os.path.relpath(d, root)
            path = '/' if rel == '.' else '/' + rel
            self._put(os.path.join(d, 'cgroup.procs'),
                      '\n'.join(members.get(path, [])))

    def exit(self, pid):
        shutil.rmtree(os.path.join(self.proc, str(pid)))
        self._sync()

    def cgroup(self, pid):
        return procfs.cgroup_of(pid, 'cpuset', self.proc)


class IsolationTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.host = self.useFixture(FakeHost())
        self.conf = cfg.ConfigOpts()
        conf_mod.register_opts(self.conf)
        self.cf = self.useFixture(config_fixture.Config(self.conf))
        self.cf.config(group='nova_pinning', reserved_cpus='0',
                       overcommit_file=os.path.join(self.host.top, 'oc'))
        self.cf.config(group='nova_pinning_isolation', cgroup_mode='v1',
                       cgroup_root=self.host.cgroot,
                       state_file=os.path.join(self.host.top, 'iso.json'),
                       pidfile_dirs=[],
                       # rsyslogd sits in a group the operator allows.
                       move_from_groups=['/', '/system/rsyslog'])
        self.conf([], default_config_files=[])

    def isolator(self):
        return agent.Isolator(self.conf, proc=self.host.proc,
                              sysfs=self.host.sysfs)

    def typical_host(self):
        h = self.host
        h.spawn(1, 'init', ppid=0)
        h.spawn(2, 'kthreadd', ppid=0)
        h.spawn(10, 'kworker/0:1', ppid=2)
        h.spawn(11, 'weird-kthread', ppid=1, flags=procfs.PF_KTHREAD)
        h.spawn(100, 'sshd')
        h.spawn(101, 'rsyslogd', cgroup='/system/rsyslog')
        h.spawn(102, 'ovs-vswitchd')
        h.spawn(103, 'qemu-system-x86', cgroup='/machine/qemu-1-g1')
        h.spawn(104, 'nova-compute')


class TestValidation(IsolationTestCase):

    def refused(self, fragment):
        exc = self.assertRaises(agent.ConfigError, self.isolator)
        self.assertIn(fragment, str(exc))
        self.assertFalse(os.path.exists(os.path.join(
            self.host.cgroot, 'cpuset', 'nova-pinning-host')))
        self.assertEqual([], self.host.writes)

    def test_reserved_cpus_unset(self):
        self.cf.config(group='nova_pinning', reserved_cpus=None)
        self.refused('not set')

    def test_reserved_cpus_the_host_lacks(self):
        self.cf.config(group='nova_pinning', reserved_cpus='2-9')
        self.refused('does not have: 4-9')

    def test_bad_syntax(self):
        self.cf.config(group='nova_pinning', reserved_cpus='0-')
        self.refused('reserved_cpus')

    def test_overlap_with_nova_guest_cpus(self):
        content = overcommit.from_nova_conf(type('C', (), {
            'cpu_allocation_ratio': 4.0, 'initial_cpu_allocation_ratio': 4.0,
            'reserved_host_cpus': 0, 'vcpu_pin_set': None, 'host': 'h',
            'compute': type('X', (), {'cpu_shared_set': '0-3',
                                      'cpu_dedicated_set': None})}))
        overcommit.write(self.conf.nova_pinning.overcommit_file, content)
        self.refused('overlaps nova\'s cpu_shared_set')

    def test_machine_slice_never_confined(self):
        self.cf.config(group='nova_pinning_isolation', cgroup_mode='systemd',
                       slices=['system.slice', 'machine.slice'])
        self.refused('machine.slice')


class TestCgroupV1(IsolationTestCase):

    def test_apply_moves_only_host_daemons(self):
        self.typical_host()
        moved = self.isolator().apply()
        self.assertEqual(3, moved)
        group = '/nova-pinning-host'
        for pid in (100, 101, 104):
            self.assertEqual(group, self.host.cgroup(pid))
        for pid, where in ((1, '/'), (2, '/'), (10, '/'), (11, '/'),
                           (102, '/'), (103, '/machine/qemu-1-g1')):
            self.assertEqual(where, self.host.cgroup(pid), pid)
        with open(os.path.join(self.host.cgroot, 'cpuset',
                               'nova-pinning-host', 'cpuset.cpus')) as f:
            self.assertEqual('0', f.read())
        state_file = self.conf.nova_pinning_isolation.state_file
        self.assertEqual(0o600, stat.S_IMODE(os.stat(state_file).st_mode))
        with open(state_file) as f:
            state = json.load(f)
        self.assertEqual('/system/rsyslog', state['moved']['101']['from'])

    def test_other_tools_cpuset_groups_are_left_alone(self):
        self.typical_host()
        self.host.spawn(400, 'containerd-shim', cgroup='/docker/abc')
        self.isolator().apply()
        self.assertEqual('/docker/abc', self.host.cgroup(400))
        self.cf.config(group='nova_pinning_isolation',
                       move_from_groups=['/', '/docker/abc'])
        self.isolator().apply()
        self.assertEqual('/nova-pinning-host', self.host.cgroup(400))

    def test_apply_twice_moves_nothing_more(self):
        self.typical_host()
        iso = self.isolator()
        iso.apply()
        self.assertEqual(0, iso.apply())

    def test_process_exiting_mid_sweep_is_skipped(self):
        self.typical_host()
        iso = self.isolator()
        original = iso.backend.move

        def exit_first(pid, to=None):
            if pid == 100:
                self.host.exit(100)
            return original(pid, to)
        iso.backend.move = exit_first
        self.assertEqual(2, iso.apply())

    def test_undo_restores_origins_and_removes_group(self):
        self.typical_host()
        iso = self.isolator()
        iso.apply()
        self.host.spawn(200, 'child-born-inside', cgroup='/nova-pinning-host')
        iso.undo()
        self.assertEqual('/system/rsyslog', self.host.cgroup(101))
        self.assertEqual('/', self.host.cgroup(100))
        self.assertEqual('/', self.host.cgroup(200))
        self.assertFalse(os.path.exists(os.path.join(
            self.host.cgroot, 'cpuset', 'nova-pinning-host')))
        self.assertFalse(os.path.exists(
            self.conf.nova_pinning_isolation.state_file))

    def test_undo_ignores_a_reused_pid(self):
        self.typical_host()
        iso = self.isolator()
        iso.apply()
        # rsyslogd exits; a new process gets pid 101, in the host group.
        self.host.spawn(101, 'imposter', start=999,
                        cgroup='/nova-pinning-host')
        iso.undo()
        # Not sent to rsyslogd's old cgroup: the record was for another
        # process; it leaves the group for the root.
        self.assertEqual('/', self.host.cgroup(101))

    def test_only_descendants(self):
        self.typical_host()
        self.host.spawn(300, 'parent', ppid=104)
        self.host.spawn(301, 'grandchild', ppid=300)
        self.cf.config(group='nova_pinning_isolation',
                       only_descendants_of=104)
        self.assertEqual(2, self.isolator().apply())
        self.assertEqual('/', self.host.cgroup(100))

    def test_status(self):
        self.typical_host()
        iso = self.isolator()
        iso.apply()
        status = iso.status()
        self.assertEqual(('v1', '0', 3), (status['mode'],
                                          status['reserved_cpus'],
                                          status['processes']))


class TestSystemd(IsolationTestCase):

    def setUp(self):
        super().setUp()
        self.log = os.path.join(self.host.top, 'systemctl.log')
        self.systemctl = os.path.join(self.host.top, 'systemctl')
        with open(self.systemctl, 'w') as f:
            f.write('#!%s\nimport sys\nopen(%r, "a").write(" ".join('
                    'sys.argv[1:]) + "\\n")\nif sys.argv[1] == "show":\n'
                    '    print("AllowedCPUs=0\\nEffectiveCPUs=0")\n'
                    % (sys.executable, self.log))
        os.chmod(self.systemctl, 0o755)
        self.cf.config(group='nova_pinning_isolation', cgroup_mode='systemd')

    def calls(self):
        with open(self.log) as f:
            return f.read().splitlines()

    def test_apply_undo_status(self):
        iso = agent.Isolator(self.conf, proc=self.host.proc,
                             sysfs=self.host.sysfs,
                             systemctl=self.systemctl)
        iso.apply()
        self.assertEqual(['set-property --runtime %s AllowedCPUs=0' % s
                          for s in ('system.slice', 'user.slice',
                                    'init.scope')], self.calls())
        status = iso.status()
        self.assertEqual({'AllowedCPUs': '0', 'EffectiveCPUs': '0'},
                         status['slices']['machine.slice'])
        iso.undo()
        self.assertIn('set-property --runtime system.slice AllowedCPUs=',
                      self.calls())
        self.assertFalse(any('machine.slice AllowedCPUs' in c
                             for c in self.calls()))

    def test_systemctl_failure_is_an_error(self):
        with open(self.systemctl, 'w') as f:
            f.write('#!/bin/sh\necho "Unit not found" >&2\nexit 5\n')
        iso = agent.Isolator(self.conf, proc=self.host.proc,
                             sysfs=self.host.sysfs,
                             systemctl=self.systemctl)
        exc = self.assertRaises(backends.BackendError, iso.apply)
        self.assertIn('Unit not found', str(exc))


class TestPidWatcher(testtools.TestCase):
    """Real inotify, real pid files, real processes."""

    def setUp(self):
        super().setUp()
        self.run = self.useFixture(fixtures.TempDir()).path
        self.watcher = pidwatch.PidWatcher([self.run])
        self.addCleanup(self.watcher.close)

    def daemon(self):
        proc = subprocess.Popen(['sleep', '60'])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc.pid

    def collect(self, seconds=2.0):
        found, end = [], time.monotonic() + seconds
        while time.monotonic() < end:
            found += self.watcher.wait(0.2)
            if found:
                break
        return found

    def test_written_in_place(self):
        pid = self.daemon()
        with open(os.path.join(self.run, 'd.pid'), 'w') as f:
            f.write('%d\n' % pid)
        self.assertEqual([pid], self.collect())

    def test_renamed_over(self):
        pid = self.daemon()
        tmp = os.path.join(self.run, '.d.pid.tmp')
        with open(tmp, 'w') as f:
            f.write('%d\n' % pid)
        self.watcher.wait(0.2)  # the temporary file: not a .pid
        os.rename(tmp, os.path.join(self.run, 'd.pid'))
        self.assertEqual([pid], self.collect())

    def test_deleted_reports_nothing(self):
        path = os.path.join(self.run, 'd.pid')
        with open(path, 'w') as f:
            f.write('%d\n' % self.daemon())
        self.collect()
        os.unlink(path)
        self.assertEqual([], self.collect(0.6))

    def test_subdirectory_made_later(self):
        sub = os.path.join(self.run, 'daemon')
        os.mkdir(sub)
        self.watcher.wait(0.3)
        pid = self.daemon()
        with open(os.path.join(sub, 'daemon.pid'), 'w') as f:
            f.write('%d\n' % pid)
        self.assertEqual([pid], self.collect())

    def test_reused_pid_is_not_reported(self):
        pid = self.daemon()
        path = os.path.join(self.run, 'old.pid')
        with open(path, 'w') as f:
            f.write('%d\n' % pid)
        # The file was written long before this process started.
        os.utime(path, (time.time() - 3600, time.time() - 3600))
        self.assertIsNone(pidwatch.pid_of_file(path))
        with open(path, 'w') as f:
            f.write('not a pid\n')
        self.assertIsNone(pidwatch.pid_of_file(path))
