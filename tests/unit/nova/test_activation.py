"""The in-nova runtime: activation, passes in or out of process, the
notifier switch."""

import dataclasses
import errno
import logging
import os
import sys
import time
from unittest import mock

import fixtures
from oslo_config import cfg
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.nova import hooks
from nova_pinning_hooks.nova import notifier
from nova_pinning_hooks.nova import passrunner
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.nova import ratiofile
from nova_pinning_hooks.passes import settings
from nova_pinning_hooks.runtime import settings as runtime_settings
from tests.fixtures import FakeLibvirtFixture
from tests.fixtures import FakeNovaLibvirtFixture
from tests.fixtures import current_runtime
from tests.fixtures import pass_runner
from tests.fixtures import passes_beyond
from tests.unit import hosts
from tests.unit.nova.test_hooks import FakeManager
from tests.unit.novaconf import nova_like_conf


class AgentTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(activation.deactivate)
        self.addCleanup(hooks.reset)
        # Records are not held for a logging set-up that never comes
        # (test_earlylog tests the holding).
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.earlylog.hold', lambda: False))
        self.cls = type('Manager', (FakeManager,), dict(vars(FakeManager)))
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        self.nova = self.useFixture(FakeNovaLibvirtFixture())


class TestActivate(AgentTestCase):

    def test_activation_writes_overcommit_hooks_and_first_pass(self):
        conf = nova_like_conf(self)
        self.fake.add_domain('g', 2, xml=hosts.domain_xml('g', 2))
        a = activation.activate(conf, manager_cls=self.cls)
        self.assertIs(a, activation.activate(conf, manager_cls=self.cls))
        self.assertEqual(4.0, overcommitfile.read(
            conf.nova_pinning.overcommit_file).allocation_ratio)
        self.assertTrue(getattr(self.cls.stop_instance,
                                '_nova_pinning_hook', None))
        self.assertTrue(a.coalescer.request('test', wait=True, timeout=10))
        self.assertIsNone(a.last_result.error)
        self.assertEqual(2, len(self.fake.by_name('g').vcpu_pins))

    def test_hooked_operation_rebinds(self):
        conf = nova_like_conf(self)
        a = activation.activate(conf, manager_cls=self.cls)
        a.coalescer.request('settle', wait=True, timeout=10)
        self.fake.add_domain('new', 1, xml=hosts.domain_xml('new', 1))
        self.cls().stop_instance('ctx', 'inst')
        self.assertTrue(a.coalescer.request('after', wait=True, timeout=10))
        self.assertEqual(1, len(self.fake.by_name('new').vcpu_pins))

    def assertNotActivated(self, conf, logs, lacking):
        self.assertIsNone(activation.activate(conf, manager_cls=self.cls))
        # Nothing hooked, nothing wrapped, no agent: not half-activated.
        self.assertIs(FakeManager.stop_instance, self.cls.stop_instance)
        self.assertIsNone(getattr(self.nova.module.get_updated_guest_xml,
                                  '_nova_pinning_strip', None))
        self.assertFalse(vars(self.nova.driver_cls).get(
            'update_provider_tree').__dict__.get('_nova_pinning_hook'))
        self.assertFalse(activation.request_pass('x'))
        self.assertFalse(os.path.exists(conf.nova_pinning.overcommit_file))
        lines = [line for line in logs.output.splitlines()
                 if 'not activated' in line]
        self.assertEqual(1, len(lines), logs.output)
        self.assertIn('this nova lacks ' + lacking, lines[0])

    def test_a_nova_without_the_unrescue_xml_method_is_refused(self):
        conf = nova_like_conf(self)
        logs = self.useFixture(fixtures.FakeLogger())
        del self.nova.driver_cls._get_existing_domain_xml
        self.assertNotActivated(
            conf, logs, 'LibvirtDriver._get_existing_domain_xml')

    def test_a_nova_whose_provider_tree_hook_differs_is_refused(self):
        conf = nova_like_conf(self)
        logs = self.useFixture(fixtures.FakeLogger())

        def update_provider_tree(self, tree, node, allocations=None):
            pass
        self.nova.driver_cls.update_provider_tree = update_provider_tree
        self.assertNotActivated(
            conf, logs, 'LibvirtDriver.update_provider_tree(self, '
            'provider_tree, nodename, ...)')

    def test_a_nova_without_the_migration_xml_function_is_refused(self):
        conf = nova_like_conf(self)
        logs = self.useFixture(fixtures.FakeLogger())
        del self.nova.module.get_updated_guest_xml
        self.assertIsNone(activation.activate(conf, manager_cls=self.cls))
        self.assertIs(FakeManager.stop_instance, self.cls.stop_instance)
        self.assertIn('this nova lacks nova.virt.libvirt.migration.'
                      'get_updated_guest_xml', logs.output)

    def test_without_novas_libvirt_driver_nothing_is_hooked(self):
        conf = nova_like_conf(self)
        logs = self.useFixture(fixtures.FakeLogger())

        def no_nova():
            raise ImportError('No module named nova')
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.migration._driver_class', no_nova))
        self.assertIsNone(activation.activate(conf, manager_cls=self.cls))
        self.assertIs(FakeManager.stop_instance, self.cls.stop_instance)
        self.assertIn('this nova lacks nova.virt.libvirt (not importable)',
                      logs.output)

    def test_disabled_installs_only_the_pin_filter(self):
        # Switched off, guests keep the live pins of earlier passes:
        # nova's live migration and unrescue XML must still lose them.
        pinned = hosts.domain_xml('g', 2, pins={0: '1', 1: '2'},
                                  emulator='1-2')
        self.nova.module.get_updated_guest_xml = lambda *a, **k: pinned
        self.nova.driver_cls._get_existing_domain_xml = \
            lambda self, *a, **k: pinned
        conf = nova_like_conf(self, enabled=False)
        logs = self.useFixture(fixtures.FakeLogger())
        self.assertIsNone(activation.activate(conf, manager_cls=self.cls))
        self.assertIs(FakeManager.stop_instance, self.cls.stop_instance)
        self.assertFalse(activation.request_pass('x'))
        self.assertFalse(os.path.exists(conf.nova_pinning.overcommit_file))
        self.assertFalse(vars(self.nova.driver_cls).get(
            'update_provider_tree').__dict__.get('_nova_pinning_hook'))
        for xml in (self.nova.module.get_updated_guest_xml(),
                    self.nova.driver_cls()._get_existing_domain_xml(
                        'inst', None)):
            self.assertIn('<domain', xml)
            self.assertNotIn('pin', xml)
        self.assertIn('enabled = false): no hook, no pass', logs.output)

    def test_unwritable_overcommit_file_is_logged_not_raised(self):
        conf = nova_like_conf(self, overcommit_file='/proc/nope/oc.json')
        logs = self.useFixture(fixtures.FakeLogger())
        a = activation.activate(conf, manager_cls=self.cls)
        self.assertIsNotNone(a)
        self.assertIn('cannot write the overcommit file', logs.output)
        a.coalescer.request('x', wait=True, timeout=10)
        self.assertIn('no pass runs until it is written',
                      a.last_result.error)

    def full_disk(self):
        """The state filesystem is full until ``disk['full']`` is unset."""
        disk = {'full': True}
        write_json = statefile.write_json

        def write(path, content, mode=0o644):
            if disk['full']:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
            return write_json(path, content, mode)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.statefile.write_json', write))
        return disk

    def test_a_stale_overcommit_file_is_never_used(self):
        # Issue 34 R4: the state filesystem full, nova-compute restarted
        # with [compute] cpu_shared_set = 1 (was unset). The log said no
        # pass would run, yet passes ran at once with the old file (no
        # shared set: every CPU) and put a guest on CPU 0, which the
        # operator had just taken from guests.
        conf = nova_like_conf(self)
        path = conf.nova_pinning.overcommit_file
        overcommitfile.write(path, ratiofile.from_nova_conf(conf))
        conf.set_override('cpu_shared_set', '1', group='compute')
        g = self.fake.add_domain('g', 1, xml=hosts.domain_xml('g', 1))
        disk = self.full_disk()
        logs = self.useFixture(fixtures.FakeLogger())
        a = activation.activate(conf, manager_cls=self.cls)
        a.coalescer.request('x', wait=True, timeout=10)
        self.assertEqual(({}, None), (g.vcpu_pins, g.emulator_pin))
        self.assertIn('No space left on device', a.last_result.error)
        self.assertIn('set aside as %s.stale' % path, logs.output)
        self.assertEqual(1, logs.output.count('cannot write the overcommit'))
        # Every reader of the file (status, plan, isolation) says so.
        exc = self.assertRaises(settings.SettingsError, settings.load,
                                settings.read(conf).ratio)
        self.assertIn('overcommit file %s is stale' % path, str(exc))
        a.coalescer.request('y', wait=True, timeout=10)  # still full
        self.assertEqual({}, g.vcpu_pins)
        self.assertEqual(1, logs.output.count('cannot write the overcommit'))
        disk['full'] = False  # space again: the next pass writes it
        a.coalescer.request('z', wait=True, timeout=10)
        self.assertIsNone(a.last_result.error)
        self.assertEqual('1', overcommitfile.read(path).shared_cpus)
        self.assertFalse(os.path.lexists(path + '.stale'))
        pinned = set(g.vcpu_pins.values()) | {g.emulator_pin}
        self.assertEqual({(1,)}, pinned)

    def test_an_unwritable_file_holding_this_configuration_is_used(self):
        # Restarted with the same configuration on a full disk: the file
        # is right, and passes run on it.
        conf = nova_like_conf(self)
        path = conf.nova_pinning.overcommit_file
        overcommitfile.write(path, ratiofile.from_nova_conf(conf))
        self.full_disk()
        logs = self.useFixture(fixtures.FakeLogger())
        a = activation.activate(conf, manager_cls=self.cls)
        a.coalescer.request('x', wait=True, timeout=10)
        self.assertIsNone(a.last_result.error)
        self.assertIn('it holds this configuration', logs.output)
        self.assertTrue(os.path.exists(path))

    def test_a_file_set_aside_that_holds_the_configuration_is_taken_back(
            self):
        # Issue 40, L-2: nova-compute, restarted with shared set 1 on a
        # full disk, set the file aside; restarted again with the
        # configuration the file holds (the disk still full), it left
        # the file aside and ran no pass until the disk had room again.
        conf = nova_like_conf(self)
        path = conf.nova_pinning.overcommit_file
        overcommitfile.write(path, ratiofile.from_nova_conf(conf))
        self.full_disk()
        conf.set_override('cpu_shared_set', '1', group='compute')
        changed = ratiofile.RatioFile(ratiofile.NovaOptions.read(conf),
                                conf.nova_pinning.overcommit_file)
        self.assertIsNotNone(changed.before_pass())
        self.assertFalse(os.path.lexists(path))
        self.assertTrue(os.path.lexists(path + '.stale'))
        conf.clear_override('cpu_shared_set', group='compute')
        logs = self.useFixture(fixtures.FakeLogger())
        restarted = ratiofile.RatioFile(ratiofile.NovaOptions.read(conf),
                                conf.nova_pinning.overcommit_file)
        self.assertIsNone(restarted.before_pass())
        self.assertTrue(restarted.ok)
        self.assertIn('taken back and used', logs.output)
        self.assertFalse(os.path.lexists(path + '.stale'))
        # Every reader has it again.
        self.assertIsNone(settings.load(settings.read(conf).ratio).shared_cpus)

    def test_a_read_only_filesystem_stops_every_reader(self):
        # Issue 40, L-2: on a filesystem remounted read-only (ext4's
        # errors=remount-ro), nova-compute restarted with shared set 1
        # could neither rewrite the file nor set it aside; it refused
        # its passes while every other reader used the old sets. The
        # kernel's side of "read-only as a whole":
        # tests/functional/test_readonly_state.py.
        conf = nova_like_conf(self)
        path = conf.nova_pinning.overcommit_file
        overcommitfile.write(path, ratiofile.from_nova_conf(conf))

        def read_only(*args, **kwargs):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.statefile.write_json', read_only))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.overcommitfile.set_aside', read_only))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.overcommitfile._read_only_filesystem',
            lambda path: True))
        conf.set_override('cpu_shared_set', '1', group='compute')
        logs = self.useFixture(fixtures.FakeLogger())
        refused = ratiofile.RatioFile(ratiofile.NovaOptions.read(conf),
                                conf.nova_pinning.overcommit_file).before_pass()
        self.assertIn('its filesystem is read-only', refused.error)
        self.assertNotIn('passes elsewhere may read it', logs.output)
        exc = self.assertRaises(settings.SettingsError, settings.load,
                               settings.read(conf).ratio)
        self.assertIn('is on a read-only filesystem', str(exc))
        # The same configuration as the file's: refused all the same,
        # as every other reader refuses it (one rule for the host).
        conf.clear_override('cpu_shared_set', group='compute')
        self.assertIsNotNone(ratiofile.RatioFile(ratiofile.NovaOptions.read(conf),
                                conf.nova_pinning.overcommit_file).before_pass())

    def test_periodic_safety_net(self):
        conf = nova_like_conf(self, periodic_interval=1)
        a = activation.activate(conf, manager_cls=self.cls)
        a.coalescer.request('settle', wait=True, timeout=10)
        passes = a.coalescer.passes
        self.fake.add_domain('late', 1, xml=hosts.domain_xml('late', 1))
        for _ in range(50):  # no request: only the timer can pin it
            if self.fake.by_name('late').vcpu_pins:
                break
            time.sleep(0.1)
        self.assertEqual(1, len(self.fake.by_name('late').vcpu_pins))
        self.assertTrue(passes_beyond(a.coalescer, passes),
                        'no pass counted after %d' % passes)


class TestOutOfProcess(AgentTestCase):

    def test_eventlet_detection_reads_sys_modules_only(self):
        self.assertNotIn('eventlet', sys.modules)
        self.assertFalse(passrunner.eventlet_patched())
        patcher = mock.Mock()
        patcher.is_monkey_patched.return_value = True
        with mock.patch.dict(sys.modules, {'eventlet.patcher': patcher}):
            self.assertTrue(passrunner.eventlet_patched())
        self.assertNotIn('eventlet', sys.modules)

    def test_the_mode_is_chosen_once_by_eventlet(self):
        # (eventlet's threads patched, out_of_process asked, the class)
        conf = nova_like_conf(self)
        config = runtime_settings.read(conf)
        nova = ratiofile.NovaOptions.read(conf)
        patcher = mock.Mock()
        patcher.is_monkey_patched.return_value = True
        for patched, asked, cls in (
                (False, None, passrunner.ThreadPasses),
                (True, None, passrunner.WorkerPasses),
                (True, False, passrunner.ThreadPasses),
                (False, True, passrunner.WorkerPasses)):
            modules = {'eventlet.patcher': patcher} if patched else {}
            with mock.patch.dict(sys.modules, modules):
                runner = passrunner.make(config, nova, out_of_process=asked)
            self.addCleanup(runner.stop)
            self.assertIsInstance(runner, cls, (patched, asked))
            self.assertEqual(cls is passrunner.WorkerPasses,
                             runner.out_of_process)

    def test_child_process_argv_carries_nova_config(self):
        conf = nova_like_conf(self)
        config = runtime_settings.read(conf)
        config = dataclasses.replace(
            config, config_files=('/etc/nova/nova.conf',
                                  '/etc/nova/nova-compute.conf'),
            config_dirs=(), report_summary=True,
            summary_file='/s/summary.json',
            passes=dataclasses.replace(config.passes,
                                       connection_uri='qemu:///system'))
        nova = ratiofile.NovaOptions.read(conf)
        a = passrunner.WorkerPasses(config, nova)
        self.addCleanup(a.stop)
        argv = a.child_argv()
        self.assertEqual([sys.executable, '-m',
                          'nova_pinning_hooks.cmd.pinning', '--config-file',
                          '/etc/nova/nova.conf', '--config-file',
                          '/etc/nova/nova-compute.conf', 'agent',
                          '--summary-file', '/s/summary.json',
                          '--connection', 'qemu:///system',
                          '--requests-on-stdin'], argv)
        b = passrunner.WorkerPasses(dataclasses.replace(
            config, report_summary=False), nova)
        self.addCleanup(b.stop)
        self.assertNotIn('--summary-file', b.child_argv())

    def test_one_long_lived_worker_started_again_if_it_dies(self):
        conf = nova_like_conf(self)
        a = pass_runner(conf, True)
        self.addCleanup(a.stop)
        logs = self.useFixture(fixtures.FakeLogger())
        tmp = self.useFixture(fixtures.TempDir()).path
        seen = os.path.join(tmp, 'requests')
        # A stand-in worker: records each request line, stops at EOF.
        worker = ('import sys\n'
                  'for line in sys.stdin:\n'
                  '    open(%r, "a").write(line)\n' % seen)
        with mock.patch.object(a, 'child_argv', return_value=[
                sys.executable, '-c', worker]):
            for _ in range(3):
                self.assertTrue(a.coalescer.request('x', wait=True,
                                                    timeout=30))
            self.assertEqual(1, a.worker_starts)
            first = a.worker
            first.kill()
            first.wait(10)
            self.assertTrue(a.coalescer.request('y', wait=True,
                                                timeout=30))
            self.assertEqual(2, a.worker_starts)
            self.assertIn('pass worker exited -9; starting it again',
                          logs.output)
            second = a.worker
            a.stop()
        self.assertEqual(0, second.wait(10))  # stopped by its EOF
        with open(seen) as f:
            self.assertIn('pass\n', f.read())  # the second one's

    def test_a_worker_that_cannot_start_is_logged(self):
        conf = nova_like_conf(self)
        a = pass_runner(conf, True)
        self.addCleanup(a.stop)
        logs = self.useFixture(fixtures.FakeLogger())
        with mock.patch.object(a, 'child_argv',
                               return_value=['/nonexistent/python']):
            self.assertTrue(a.coalescer.request('x', wait=True, timeout=30))
        self.assertIs(False, a.last_result)
        self.assertIn('pass worker not started', logs.output)


class TestNotifierSwitch(AgentTestCase):

    def test_other_nova_services_ignore_it(self):
        conf = nova_like_conf(self)
        with mock.patch.object(activation, 'in_nova_compute',
                               return_value=False):
            notifier.ActivationDriver(conf, topics=['n'], transport=None)
        self.assertIsNone(current_runtime())

    def test_activation_failure_never_reaches_nova(self):
        conf = nova_like_conf(self)
        with mock.patch.object(activation, 'in_nova_compute',
                               return_value=True), \
                mock.patch.object(activation, 'activate',
                                  side_effect=RuntimeError('broken')):
            drv = notifier.ActivationDriver(conf, topics=['n'],
                                            transport=None)
        self.assertIsNone(drv.notify({}, {'event_type': 'x'}, 'INFO', -1))

    def notifications_to(self, drivers):
        """What activation says of the other notification drivers."""
        conf = nova_like_conf(self)
        conf.register_opts([cfg.MultiStrOpt('driver', default=[])],
                           group='oslo_messaging_notifications')
        conf.set_override('driver', drivers,
                          group='oslo_messaging_notifications')
        logs = self.useFixture(fixtures.FakeLogger(level=logging.INFO))
        with mock.patch.object(activation, 'in_nova_compute',
                               return_value=True), \
                mock.patch.object(activation, 'activate', return_value=None):
            notifier.ActivationDriver(conf, topics=['n'], transport=None)
        return [line for line in logs.output.splitlines()
                if 'notification drivers' in line]

    def test_activation_names_the_other_notification_drivers(self):
        self.assertEqual(
            ["nova-pinning-hooks: nova's notifications from this compute "
             'also go to the notification drivers: messagingv2, log'],
            self.notifications_to(['messagingv2', 'nova_pinning', 'log']))

    def test_activation_says_when_no_other_service_gets_notifications(self):
        for drivers in (['nova_pinning'], ['nova_pinning', 'noop']):
            self.assertEqual(
                ['nova-pinning-hooks: other notification drivers: none: no '
                 "other service receives nova's notifications from this "
                 'compute'], self.notifications_to(drivers))

    def test_in_nova_compute(self):
        with mock.patch.object(sys, 'argv', ['/usr/bin/nova-compute']):
            self.assertTrue(activation.in_nova_compute())
        with mock.patch.object(sys, 'argv', ['/usr/bin/nova-api']), \
                mock.patch.dict(sys.modules):
            sys.modules.pop('nova.cmd.compute', None)
            self.assertFalse(activation.in_nova_compute())


def with_nova_libvirt(conf, **values):
    """nova's [libvirt] options (as nova registers them), set."""
    conf.register_opts([cfg.StrOpt('connection_uri', default=''),
                        cfg.StrOpt('virt_type', default='kvm')],
                       group='libvirt')
    for name, value in values.items():
        conf.set_override(name, value, group='libvirt')
    return conf


class TestNovaConnection(AgentTestCase):
    """Inside nova-compute the package binds nova's libvirt's guests."""

    def test_follows_nova_connection_uri(self):
        conf = with_nova_libvirt(nova_like_conf(self),
                                 connection_uri='qemu+tcp://h2:16510/system')
        self.assertEqual('qemu+tcp://h2:16510/system',
                         activation.follow_nova_connection(conf))
        self.assertEqual('qemu+tcp://h2:16510/system',
                         conf.nova_pinning.connection_uri)

    def test_nova_default_by_virt_type(self):
        for virt_type, uri in [('kvm', 'qemu:///system'),
                               ('qemu', 'qemu:///system'),
                               ('lxc', 'lxc:///'),
                               ('parallels', 'parallels:///system')]:
            conf = with_nova_libvirt(nova_like_conf(self),
                                     virt_type=virt_type)
            self.assertEqual(uri, activation.follow_nova_connection(conf))

    def test_ours_wins_when_set(self):
        conf = with_nova_libvirt(nova_like_conf(
            self, connection_uri='qemu+unix:///system?socket=/s'),
            connection_uri='qemu+tcp://h2:16510/system')
        self.assertEqual('qemu+unix:///system?socket=/s',
                         activation.follow_nova_connection(conf))

    def test_ours_from_a_file_wins_even_at_its_default_value(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write('[libvirt]\nconnection_uri = qemu+tcp://h2/system\n'
                    '[nova_pinning]\nconnection_uri = qemu:///system\n')
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        with_nova_libvirt(conf)
        conf(['--config-file', path], default_config_files=[])
        self.assertEqual('qemu:///system',
                         activation.follow_nova_connection(conf))

    def test_out_of_nova_unchanged(self):
        conf = nova_like_conf(self)  # no [libvirt] group
        self.assertEqual('qemu:///system',
                         activation.follow_nova_connection(conf))

    def test_activation_binds_nova_libvirt_not_the_default(self):
        nova_host = self.useFixture(FakeLibvirtFixture(
            hosts.load('small-1node'), uri='test:///nova')).host
        nova_host.add_domain('g', 2, xml=hosts.domain_xml('g', 2))
        self.fake.add_domain('other', 2, xml=hosts.domain_xml('other', 2))
        conf = with_nova_libvirt(nova_like_conf(self),
                                 connection_uri='test:///nova')
        a = activation.activate(conf, manager_cls=self.cls)
        self.assertTrue(a.coalescer.request('test', wait=True, timeout=10))
        self.assertEqual(2, len(nova_host.by_name('g').vcpu_pins))
        self.assertEqual({}, self.fake.by_name('other').vcpu_pins)
        self.assertEqual(0, sum(self.fake.calls.values()))
        # The worker, under eventlet, is started on the same connection.
        worker = passrunner.WorkerPasses(a.config,
                                         ratiofile.NovaOptions.read(conf))
        self.addCleanup(worker.stop)
        self.assertEqual(['--connection', 'test:///nova'],
                         worker.child_argv()[-3:-1])
