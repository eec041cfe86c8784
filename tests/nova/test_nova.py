"""nova-pinning-hooks inside the real nova from PyPI (tox -e nova-N: each
release of tools/nova-releases).

Each test starts a child process that starts up like nova-compute (import
nova.cmd.compute, parse the configuration) with
``[oslo_messaging_notifications] driver = nova_pinning`` in its
configuration, which is how an operator switches the package on, sets
up logging into a log file as nova-compute does, then calls a hooked
ComputeManager method through nova's own decorators. One
child per concurrency mode: nova's native threading mode (eventlet
forbidden) and its eventlet mode.
"""

import json
import os
import subprocess
import sys

import fixtures
import testtools

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, 'nova_compute_child.py')
# nova's own libvirt connection: in the fake, where the child's nova guest
# is (qemu:///system holds another compute's guest); for real, this
# host's libvirtd through its socket, a URI other than the package's
# default.
FAKE_NOVA_URI = 'qemu+tcp://nova-libvirt.invalid/system'
REAL_NOVA_URI = 'qemu+unix:///system?socket=/run/libvirt/libvirt-sock'

CONF = """[DEFAULT]
transport_url = fake:/
host = compute-test
state_path = {tmp}
log_file = {tmp}/nova-compute.log
cpu_allocation_ratio = {ratio}
[compute]
cpu_shared_set = {shared}
[libvirt]
connection_uri = {uri}
[oslo_messaging_notifications]
driver = nova_pinning
[nova_pinning]
lock_path = {tmp}
overcommit_file = {tmp}/overcommit.json
summary_file = {tmp}/summary.json
coalesce_delay = 0
periodic_interval = 0
# The eventlet child passes against the host's real libvirtd: only domains
# created by nova (none here) may be touched.
foreign_domains = ignore
"""

EXPECTED_HOOKED = {
    '_do_build_and_run_instance', 'init_host', 'terminate_instance',
    'stop_instance', 'start_instance', 'reboot_instance',
    'rebuild_instance', 'soft_delete_instance', 'restore_instance',
    'rescue_instance', 'unrescue_instance', 'resize_instance',
    'finish_resize', 'revert_resize', 'finish_revert_resize',
    '_post_live_migration', 'post_live_migration_at_destination',
    'rollback_live_migration_at_destination', 'shelve_instance',
    'shelve_offload_instance', 'unshelve_instance', 'suspend_instance',
    'resume_instance', 'pause_instance', 'unpause_instance',
    'finish_snapshot_based_resize_at_dest',
    'revert_snapshot_based_resize_at_dest',
    'finish_revert_snapshot_based_resize_at_source'}


class NovaChildTestCase(testtools.TestCase):

    def run_child(self, mode, fake, ratio=2.0, shared='0-1'):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write(CONF.format(tmp=tmp, ratio=ratio, shared=shared,
                                uri=FAKE_NOVA_URI if fake
                                else REAL_NOVA_URI))
        argv = [sys.executable, CHILD, mode, path] + (['fake'] if fake
                                                      else [])
        env = dict(os.environ)
        env.pop('OS_NOVA_DISABLE_EVENTLET_PATCHING', None)
        proc = subprocess.run(argv, capture_output=True, text=True,
                              timeout=600, env=env)
        lines = [x for x in proc.stdout.splitlines()
                 if x.startswith('REPORT ')]
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        self.assertEqual(1, len(lines), proc.stdout + proc.stderr[-3000:])
        self.stderr = proc.stderr
        with open(os.path.join(tmp, 'overcommit.json')) as f:
            self.overcommit = json.load(f)
        self.tmp = tmp
        with open(os.path.join(tmp, 'nova-compute.log')) as f:
            self.log = f.read()
        return json.loads(lines[0][len('REPORT '):])

    def check_common(self, report):
        self.assertTrue(report['active'])
        # Every configured method this nova has is wrapped; live_resize
        # (the seed's own nova) is not in upstream nova and is skipped.
        self.assertEqual(EXPECTED_HOOKED, set(report['wrapped']))
        self.assertTrue(report['signatures_kept'])
        # Through wrap_exception, reverts_task_state, wrap_instance_event
        # and wrap_instance_fault: one request, nova's result untouched.
        self.assertEqual({'rv': 'None', 'driver_called': True},
                         report['ok_call'])
        self.assertEqual(1, report['requests_after_ok'])
        self.assertEqual({'raised_same': True, 'driver_called': True},
                         report['failed_call'])
        self.assertEqual(0, report['requests_after_failure'])
        self.assertEqual(42, report['value_through_hook'])
        # A pass never stalls the process: other threads keep ticking.
        self.assertLess(report['longest_tick_gap_during_pass'], 0.5)
        self.assertEqual(1, report['requests_after_value'])
        self.assertEqual(2.0, self.overcommit['allocation_ratio'])
        self.assertEqual('cpu_allocation_ratio',
                         self.overcommit['ratio_source'])
        self.assertEqual('0-1', self.overcommit['shared_cpus'])
        self.assertEqual('compute-test', self.overcommit['host'])
        # The activation lines admin/nova.rst tells operators to look for reach
        # nova-compute's log file, though the package was activated
        # before nova set up its logging.
        self.assertIn('nova-pinning-hooks: wrote %s/overcommit.json'
                      % self.tmp, self.log)
        self.assertIn('nova-pinning-hooks: hook bind_numa_affinity runs '
                      'after ComputeManager.', self.log)
        self.assertIn('nova-pinning-hooks: active (', self.log)
        # The summary for nova's scheduler: on nova's own resource
        # tracker (its _update, every claim and audit).
        self.assertIn('nova-pinning-hooks: hook nova_pinning_node_summary '
                      'runs after ResourceTracker._update', self.log)


class TestThreadingMode(NovaChildTestCase):

    def test_switched_on_by_configuration(self):
        report = self.run_child('threading', fake=True)
        self.check_common(report)
        # nova 32 and later forbid eventlet in this mode; older nova
        # (no native threading mode) still imports it, unpatched. Either
        # way the package runs its passes in process.
        self.assertEqual(not report['native_threading'],
                         report['eventlet_loaded'])
        self.assertFalse(report['eventlet_patched'])
        self.assertFalse(report['out_of_process'])
        # Every module imported with nova's eventlet import poison on.
        self.assertIn('nova_pinning_hooks.nova.activation', report['imported'])
        self.assertIn('nova_pinning_hooks.host.virt', report['imported'])
        # The passes ran in process, on the fake libvirt, and pinned the
        # nova guest one-to-one on the 4-CPU host.
        self.assertEqual('None', report['first_pass'])
        self.assertEqual('None', report['last_pass'])
        self.assertEqual(2, len(report['fake_pins']))
        self.assertEqual(2, len({tuple(c) for c in
                                 report['fake_pins'].values()}))
        # It followed nova's [libvirt] connection_uri: the libvirt at the
        # package's default URI (another compute's) was never opened.
        self.assertEqual(FAKE_NOVA_URI, report['connection_uri'])
        self.assertIn("nova-pinning-hooks: libvirt connection %s (nova's: "
                      "[libvirt] connection_uri)" % FAKE_NOVA_URI, self.log)
        self.assertEqual({}, report['decoy_pins'])
        self.assertEqual(0, report['decoy_calls'])


class TestEventletMode(NovaChildTestCase):

    def test_switched_on_by_configuration(self):
        report = self.run_child('eventlet', fake=False)
        self.check_common(report)
        self.assertTrue(report['eventlet_patched'])
        # Passes run in one long-lived worker process (nova-pinning agent
        # with nova's configuration files) against this host's libvirtd:
        # started once, each request a line on its stdin.
        self.assertTrue(report['out_of_process'])
        self.assertEqual('True', report['first_pass'])
        self.assertEqual('True', report['last_pass'])
        self.assertTrue(report['worker_alive'])
        self.assertEqual(1, report['worker_starts'])
        # The worker is told nova's libvirt connection.
        self.assertEqual(REAL_NOVA_URI, report['connection_uri'])
        argv = report['child_argv']
        self.assertEqual(REAL_NOVA_URI, argv[argv.index('--connection') + 1])
        # Its passes ran and failed none; they are logged where nova's
        # configuration says (its log_file), each once: not a second time
        # on the stderr it shares with nova-compute (seen in the cloud:
        # every pass line twice in nova-compute's log, whose stderr goes
        # to that file too).
        passes = [x for x in self.log.splitlines()
                  if 'rebinding pass:' in x]
        self.assertTrue(passes, self.log[-3000:])
        self.assertEqual(len(passes), len(set(passes)), passes)
        self.assertNotIn('rebinding pass failed', self.log)
        self.assertNotIn('rebinding pass not run', self.log)
        self.assertNotIn('rebinding pass', self.stderr)
