"""cgroup v1 on a fake host: apply, sweep, undo, state file, status."""

import errno
import json
import os
import stat

from nova_pinning_hooks.isolation import cgroupv1
from nova_pinning_hooks.isolation import classify
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import report
from nova_pinning_hooks.isolation import state
from tests.unit.isolation import base

GROUP = '/nova-pinning-host'


class TestApply(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host.typical()

    def recorded(self):
        with open(self.state_file) as f:
            return json.load(f)

    def test_moves_only_host_daemons(self):
        self.assertEqual(3, self.isolator().apply())
        for pid in (100, 101, 104):
            self.assertEqual(GROUP, self.host.cgroup(pid))
        for pid, where in ((1, '/'), (2, '/'), (10, '/'), (11, '/'),
                           (102, '/'), (103, '/machine/qemu-1-g1'),
                           (105, '/')):
            self.assertEqual(where, self.host.cgroup(pid), pid)
        self.assertEqual('0', self.group_file('cpuset.cpus'))
        self.assertEqual('0', self.group_file('cpuset.mems'))
        st = self.recorded()
        self.assertEqual(['100', '101', '104'], sorted(st['moved']))
        self.assertEqual({'comm': 'rsyslogd', 'start': 100,
                          'cpuset': '/system/rsyslog'}, st['moved']['101'])
        self.assertEqual(('v1', '0'), (st['mode'], st['cpus']))
        self.assertEqual({'cpuset': True, 'memory': None},
                         st['v1']['created'])

    def test_state_file_is_private_and_atomic(self):
        self.isolator().apply()
        mode = stat.S_IMODE(os.stat(self.state_file).st_mode)
        self.assertEqual(0o600, mode)
        # Beside it, the status the metrics read (tests/unit/isolation/
        # test_statusfile.py), readable by the nova user.
        self.assertEqual(['isolation.json', 'isolation.json.lock',
                          'isolation.status.json'],
                         sorted(os.listdir(os.path.dirname(
                             self.state_file))))

    def test_each_move_is_recorded_before_it_is_made(self):
        iso = self.isolator()
        original = iso.backend.move
        seen = []

        def move(pid, memory=False):
            seen.append(str(pid) in self.recorded()['moved'])
            return original(pid, memory)
        iso.backend.move = move
        iso.apply()
        self.assertEqual([True, True, True], seen)

    def test_second_apply_moves_and_writes_nothing(self):
        iso = self.isolator()
        iso.apply()
        self.host.writes.clear()
        self.assertEqual(0, iso.apply())
        self.assertEqual([], self.host.writes)

    def test_new_cpus_on_reapply(self):
        self.isolator().apply()
        self.cf.config(group='nova_pinning', reserved_cpus='0-1')
        self.isolator().apply()
        self.assertEqual('0-1', self.group_file('cpuset.cpus'))
        self.assertEqual('0-1', self.recorded()['cpus'])

    def test_memory_nodes(self):
        self.config(memory_nodes='0')
        self.isolator().apply()
        self.assertEqual('0', self.group_file('cpuset.mems'))

    def test_other_tools_groups_are_left_alone(self):
        self.host.spawn(400, 'containerd-shim', cgroup='/docker/abc')
        self.isolator().apply()
        self.assertEqual('/docker/abc', self.host.cgroup(400))

    def test_process_exiting_mid_sweep_is_skipped(self):
        iso = self.isolator()
        original = iso.backend.move

        def exit_first(pid, memory=False):
            if pid == 100:
                self.host.exit(100)
            return original(pid, memory)
        iso.backend.move = exit_first
        self.assertEqual(2, iso.apply())
        self.assertNotIn('100', self.recorded()['moved'])

    def test_pid_reused_between_scan_and_move_is_not_moved(self):
        iso = self.isolator()
        scan = classify.scan

        def scan_then_reuse(*args):
            result = scan(*args)
            self.host.spawn(104, 'newcomer', start=999)  # same pid
            return result
        self.patch(classify, 'scan', scan_then_reuse)
        self.assertEqual(2, iso.apply())
        self.assertEqual('/', self.host.cgroup(104))
        self.assertNotIn('104', self.recorded()['moved'])

    def test_refused_move_is_logged_and_skipped(self):
        write = cgroupv1._write

        def refuse_sshd(path, value):
            if value == '100':
                raise PermissionError(errno.EPERM, 'Operation not '
                                      'permitted')
            return write(path, value)
        self.patch(cgroupv1, '_write', refuse_sshd)
        self.assertEqual(2, self.isolator().apply())
        self.assertEqual('/', self.host.cgroup(100))
        self.assertEqual(['101', '104'], sorted(self.recorded()['moved']))

    def test_only_descendants(self):
        self.host.spawn(300, 'parent', ppid=104)
        self.host.spawn(301, 'grandchild', ppid=300)
        self.config(only_descendants_of=104)
        self.assertEqual(2, self.isolator().apply())
        self.assertEqual('/', self.host.cgroup(100))
        self.assertEqual(GROUP, self.host.cgroup(301))

    def test_sweep_forgets_exited_processes(self):
        iso = self.isolator()
        iso.apply()
        self.host.exit(100)
        self.host.spawn(200, 'new-daemon')
        self.assertEqual(1, iso.sweep())
        self.assertEqual(['101', '104', '200'],
                         sorted(self.recorded()['moved']))

    def assert_memory_confined_then_undone(self):
        self.assertEqual(str(512 * 1024 * 1024), self.group_file(
            'memory.limit_in_bytes', controller='memory'))
        self.assertEqual(GROUP, self.host.cgroup(100, 'memory'))
        self.assertEqual('/', self.recorded()['moved']['100']['memory'])
        self.undo()
        self.assertEqual('/', self.host.cgroup(100, 'memory'))
        self.assertFalse(os.path.exists(self.host.group_dir(
            'nova-pinning-host', 'memory')))

    def test_memory_limit(self):
        self.config(memory_limit_mib=512)
        self.isolator().apply()
        self.assert_memory_confined_then_undone()

    def test_memory_limit_added_later_is_undone_too(self):
        self.isolator().apply()
        self.config(memory_limit_mib=512)
        self.isolator().apply()
        self.assertTrue(self.recorded()['v1']['created']['memory'])
        self.assert_memory_confined_then_undone()

    def test_memory_groups_of_others_are_left_alone(self):
        self.host.spawn(300, 'service', memory='/system.slice/x.service')
        self.config(memory_limit_mib=512)
        self.isolator().apply()
        self.assertEqual(GROUP, self.host.cgroup(300))
        self.assertEqual('/system.slice/x.service',
                         self.host.cgroup(300, 'memory'))
        self.assertNotIn('memory', self.recorded()['moved']['300'])

    def test_refuses_over_another_setup(self):
        self.isolator().apply()
        self.config(group_name='other')
        exc = self.assertRaises(config.ConfigError, self.isolator().apply)
        self.assertIn('run "nova-pinning-isolate undo" first', str(exc))
        self.assertFalse(os.path.exists(self.host.group_dir('other')))

    def test_corrupt_state_refused(self):
        os.makedirs(os.path.dirname(self.state_file))
        with open(self.state_file, 'w') as f:
            f.write('{"version": 1, "mo')
        os.chmod(self.state_file, 0o600)
        exc = self.assertRaises(state.StateError, self.isolator().apply)
        self.assertIn('is corrupt', str(exc))
        self.assertEqual([], self.host.writes)

    def test_state_writable_by_others_not_trusted(self):
        self.isolator().apply()
        os.chmod(self.state_file, 0o666)
        exc = self.assertRaises(state.StateError, self.isolator().apply)
        self.assertIn('not trusted', str(exc))

    def test_state_naming_odd_paths_refused(self):
        self.isolator().apply()
        st = self.recorded()
        st['moved']['100']['cpuset'] = '/../../etc'
        state.save(self.state_file, st)
        self.assertRaises(state.StateError, self.isolator().apply)

    def test_one_agent_at_a_time(self):
        iso = self.isolator()
        with iso.lock:
            exc = self.assertRaises(state.StateError,
                                    self.isolator().apply)
        self.assertIn('another nova-pinning-isolate', str(exc))
        self.assertEqual([], self.host.writes)


class TestUndo(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host.typical()

    def test_restores_origins_and_removes_group(self):
        self.isolator().apply()
        self.host.spawn(200, 'child-of-rsyslog', ppid=101, cgroup=GROUP)
        self.host.spawn(201, 'orphan', cgroup=GROUP)
        result = self.undo()
        self.assertEqual(('v1', 3, 2, ()), tuple(result)[:4])
        self.assertEqual('/system/rsyslog', self.host.cgroup(101))
        self.assertEqual('/system/rsyslog', self.host.cgroup(200))
        for pid in (100, 104, 201):
            self.assertEqual('/', self.host.cgroup(pid))
        self.assertFalse(os.path.exists(self.host.group_dir(
            'nova-pinning-host')))
        self.assertFalse(os.path.exists(self.state_file))

    def test_after_a_crash_and_without_reserved_cpus(self):
        self.isolator().apply()
        # A new process (the agent restarted) with the option removed.
        self.cf.config(group='nova_pinning', reserved_cpus=None)
        self.assertEqual(3, self.undo().restored)
        self.assertEqual('/system/rsyslog', self.host.cgroup(101))

    def test_reused_pid_goes_to_the_root_not_the_old_origin(self):
        self.isolator().apply()
        # rsyslogd exits; a new process gets pid 101 in the host group.
        self.host.spawn(101, 'imposter', start=999, cgroup=GROUP)
        self.undo()
        self.assertEqual('/', self.host.cgroup(101))

    def test_process_moved_elsewhere_meanwhile_is_left_there(self):
        self.isolator().apply()
        self.host.spawn(100, 'sshd', cgroup='/docker/x')  # same start
        self.undo()
        self.assertEqual('/docker/x', self.host.cgroup(100))

    def test_origin_group_gone_means_root(self):
        self.isolator().apply()
        os.rename(self.host.group_dir('system'),
                  self.host.group_dir('gone'))
        self.undo()
        self.assertEqual('/', self.host.cgroup(101))

    def test_thread_affinity_the_move_reset_is_set_again(self):
        self.host.spawn(300, 'irq-helper', threads={300: '/', 301: '/'},
                        affinity={300: '0-3', 301: '2'})
        self.isolator().apply()
        with open(self.state_file) as f:
            entry = json.load(f)['moved']['300']
        self.assertEqual({'301': '2'}, entry['affinity'])
        self.undo()
        self.assertEqual([(301, frozenset([2]))], self.host.affinity)

    def test_group_that_existed_gets_its_settings_back(self):
        d = self.host.group_dir('nova-pinning-host')
        os.makedirs(d)
        for name, value in (('cpuset.cpus', '0-1'), ('cpuset.mems', '0')):
            with open(os.path.join(d, name), 'w') as f:
                f.write(value)
        self.isolator().apply()
        self.assertEqual('0', self.group_file('cpuset.cpus'))
        self.undo()
        self.assertEqual('0-1', self.group_file('cpuset.cpus'))

    def test_incomplete_undo_keeps_the_state(self):
        self.isolator().apply()
        write = cgroupv1._write

        def stuck(path, value):
            if value == '104' and not path.startswith(
                    self.host.group_dir('nova-pinning-host')):
                raise PermissionError(errno.EPERM, 'Operation not '
                                      'permitted')
            return write(path, value)
        self.patch(cgroupv1, '_write', stuck)
        result = self.undo()
        self.assertEqual(2, result.restored)
        self.assertIn('pids 104 stay in', ' '.join(result.failures))
        with open(self.state_file) as f:
            self.assertEqual(['104'], list(json.load(f)['moved']))
        self.patch(cgroupv1, '_write', write)
        self.assertEqual((), self.undo().failures)
        self.assertEqual('/', self.host.cgroup(104))

    def test_nothing_to_undo(self):
        self.assertEqual((None, 0, 0, ()), tuple(self.undo())[:4])
        self.assertEqual([], self.host.writes)

    def test_unusable_state_falls_back_to_the_configured_group(self):
        self.isolator().apply()
        with open(self.state_file, 'w') as f:
            f.write('garbage')
        result = self.undo()
        self.assertIn('is corrupt', result.failures[0])
        self.assertTrue(os.path.exists(self.state_file + '.unusable'))
        for pid in (100, 101, 104):
            self.assertEqual('/', self.host.cgroup(pid))
        self.assertFalse(os.path.exists(self.host.group_dir(
            'nova-pinning-host')))


class TestStatus(base.TestCase):

    def test_v1(self):
        self.host.typical()
        self.isolator().apply()
        self.host.spawn(200, 'started-since')
        st = report.status(self.options(), self.host.paths)
        self.assertEqual(
            ('applied', 'v1', '0', '0', 3, 1, 3),
            (st['state'], st['mode'], st['reserved_cpus'],
             st['group_cpus'], st['confined'], st['not_confined'],
             st['recorded_processes']))
        self.assertEqual({'init': 1, 'kernel thread': 3, 'zombie': 1,
                          'excluded name ovs-vswitchd': 1,
                          'guest (machine cgroup)': 1}, st['kept'])

    def test_not_applied_and_not_configured(self):
        self.assertEqual('not applied', report.status(
            self.options(), self.host.paths)['state'])
        self.cf.config(group='nova_pinning', reserved_cpus=None)
        st = report.status(self.options(), self.host.paths)
        self.assertEqual('not configured', st['state'])
        self.assertIn('reserved_cpus is not set', st['why'])

    def test_never_raises(self):
        def broken(*args):
            raise RuntimeError('boom')
        self.patch(classify, 'scan', broken)
        st = report.status(self.options(), self.host.paths)
        self.assertEqual({'state': 'unknown',
                          'error': 'RuntimeError: boom'}, st)
