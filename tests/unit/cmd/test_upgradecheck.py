"""The checks of ``nova-pinning-status upgrade check``, one by one, on
temporary state files, a fake /proc, the fake libvirt and a fake nova
in a child Python."""

import json
import os
import shutil
import sys
import time

import fixtures
from oslo_config import cfg
from oslo_upgradecheck import upgradecheck as oslo_upgradecheck
import testtools

from nova_pinning_hooks.cmd import confcheck
from nova_pinning_hooks.cmd import upgradecheck
from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.host import libvirtapi
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.host import virt
from nova_pinning_hooks.isolation import config as iso_config
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation import statusfile
from nova_pinning_hooks.observe import version
from tests import fakelibvirt
from tests import fakenova
from tests import nova_releases
from tests.fixtures import FakeLibvirtFixture
from tests.fixtures import host_options
from tests.unit import hosts
from tests.unit.host.test_safefs import Alarm

Code = oslo_upgradecheck.Code
BOOT = '6a3c0cfa-0000-4000-8000-000000000001'
SYSTEMD_STATE = {
    'version': 1, 'mode': 'systemd', 'cpus': '0', 'boot_id': BOOT,
    'systemd': {'previous': {'system.slice': {'AllowedCPUs': ''}}},
    'moved': {}}


class ChecksTestCase(testtools.TestCase):
    """A host in a temporary directory: the state directory, a /proc
    with a boot id, the configuration file the checks read."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.state_dir = os.path.join(self.tmp, 'state')
        os.makedirs(os.path.join(self.state_dir, 'nova'))
        self.proc = os.path.join(self.tmp, 'proc')
        self.boot(BOOT)
        self.overcommit = os.path.join(self.state_dir, 'nova',
                                       'overcommit.json')
        self.state_file = os.path.join(self.state_dir, 'isolation.json')
        self.textfile = os.path.join(self.tmp, 'nova_pinning.prom')
        self.config = os.path.join(self.tmp, 'nova.conf')
        self.write_config()

    def boot(self, boot_id):
        path = os.path.join(self.proc, 'sys', 'kernel', 'random')
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, 'boot_id'), 'w') as f:
            f.write(boot_id + '\n')

    def write_config(self, text='', pinning='', isolation='', path=None):
        with open(path or self.config, 'w') as f:
            f.write('[nova_pinning]\novercommit_file = %s\n%s\n'
                    '[nova_pinning_isolation]\nstate_file = %s\n%s\n%s'
                    % (self.overcommit, pinning, self.state_file,
                       isolation, text))

    def checks(self, *files):
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        conf([a for f in (files or [self.config])
              for a in ('--config-file', f)], default_config_files=[])
        return upgradecheck.Checks(
            conf, paths=iso_config.HostPaths(proc=self.proc))

    def run_check(self, name, *files):
        result = getattr(self.checks(*files), name)()
        self.assertIsInstance(result, oslo_upgradecheck.Result)
        self.assertEqual(1, len(result.details.splitlines()),
                         result.details)
        return result.code, result.details

    def assertCode(self, code, result, *fragments):
        self.assertEqual(code, result[0], result[1])
        for fragment in fragments:
            self.assertIn(fragment, result[1])

    def write_overcommit(self, **changes):
        content = {'version': 1, 'allocation_ratio': 4.0,
                   'ratio_source': 'cpu_allocation_ratio',
                   'shared_cpus': '1-3', 'dedicated_cpus': None,
                   'host': 'compute-1',
                   'written_at': '2026-11-25T12:00:00+00:00'}
        content.update(changes)
        with open(self.overcommit, 'w') as f:
            json.dump(content, f)

    def write_state(self, **changes):
        content = dict(SYSTEMD_STATE, **changes)
        state.save(self.state_file, content)

    def publish(self, status=None, sweep_interval=30):
        statusfile.write(self.state_file, status or {'state': 'applied'},
                         sweep_interval, proc=self.proc)


class TestNova(ChecksTestCase):
    """A fake nova on the child Python's path: the probe imports it."""

    def nova(self, **kw):
        top = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(
            'PYTHONPATH', fakenova.make(top, **kw)))

    # The releases as tools/nova-releases lists them; fakenova is the
    # newest unless told.
    OLDEST = nova_releases.oldest()
    NEWEST = nova_releases.newest()
    TESTED = 'nova %d to %d' % (OLDEST.series, NEWEST.series)

    def test_a_nova_with_everything(self):
        self.nova()
        self.assertCode(Code.SUCCESS, self.run_check('check_nova'),
                        'nova %s has every part the package wraps '
                        '(tested: %s)' % (self.NEWEST.nova, self.TESTED))

    def test_a_nova_lacking_a_part_is_a_failure(self):
        self.nova(lacking=('get_updated_guest_xml',))
        self.assertCode(Code.FAILURE, self.run_check('check_nova'),
                        'nova %s lacks nova.virt.libvirt.migration.'
                        'get_updated_guest_xml' % self.NEWEST.nova,
                        'would not activate')

    def test_a_driver_that_does_not_import_is_a_failure(self):
        self.nova(broken='cannot import name eventlet')
        self.assertCode(Code.FAILURE, self.run_check('check_nova'),
                        'nova.virt.libvirt (not importable) (ImportError: '
                        'cannot import name eventlet)')

    def test_an_untested_release_is_a_warning(self):
        self.nova(version='%d.0.0' % (self.NEWEST.series + 1))
        self.assertCode(Code.WARNING, self.run_check('check_nova'),
                        'tested with %s only' % self.TESTED)

    def test_no_nova_here(self):
        top = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable('PYTHONPATH', top))
        self.assertCode(Code.SUCCESS, self.run_check('check_nova'),
                        'nova is not installed in this Python',
                        'outside nova-compute')
        # ... where nova-compute is told to load the package: wrong Python.
        self.write_config(
            '[oslo_messaging_notifications]\ndriver = nova_pinning\n')
        self.assertCode(Code.FAILURE, self.run_check('check_nova'),
                        'nova is not installed in this Python',
                        "run the nova-pinning-status of nova-compute's own "
                        'environment')

    def test_a_probe_that_hangs_is_killed_in_time(self):
        script = os.path.join(self.tmp, 'python')
        with open(script, 'w') as f:
            f.write('#!/bin/sh\nexec sleep 60\n')
        os.chmod(script, 0o755)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.cmd.upgradecheck.PROBE_TIMEOUT', 0.5))
        checks = self.checks()
        checks.python = script
        start = time.monotonic()
        result = checks.check_nova()
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(Code.WARNING, result.code)
        self.assertIn('did not answer within 0.5 s (killed)',
                      result.details)

    def test_a_probe_that_fails_says_why(self):
        script = os.path.join(self.tmp, 'python')
        with open(script, 'w') as f:
            f.write('#!/bin/sh\necho "Segmentation fault" >&2\nexit 139\n')
        os.chmod(script, 0o755)
        checks = self.checks()
        checks.python = script
        result = checks.check_nova()
        self.assertEqual(Code.WARNING, result.code)
        self.assertIn('exited 139: Segmentation fault', result.details)


class TestBinding(ChecksTestCase):

    def test_the_binding(self):
        self.useFixture(FakeLibvirtFixture(hosts.load('small-1node')))
        self.assertCode(Code.SUCCESS, self.run_check('check_binding'),
                        'libvirt binding for libvirt 9.0.0')

    def test_no_binding_is_a_failure(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.libvirtapi.libvirt',
            libvirtapi._Missing()))
        self.assertCode(Code.FAILURE, self.run_check('check_binding'),
                        libvirtapi.MISSING)


class TestConfiguration(ChecksTestCase):

    def test_known_and_valid(self):
        self.write_config('[libvirt]\nvirt_type = kvm\n',
                          pinning='reserved_cpus = 0')
        self.assertCode(Code.SUCCESS, self.run_check('check_configuration'),
                        'every option of ours known and valid')

    def test_what_the_commands_refuse_is_a_failure_each_named(self):
        self.write_config('[isolation]\nsweep_interval = 3\n',
                          pinning='reserved_cpu = 0\nlock_timeout = soon',
                          isolation='sweep_intervl = 3')
        code, details = self.run_check('check_configuration')
        self.assertEqual(Code.FAILURE, code)
        for fragment in (
                '[nova_pinning] has no option reserved_cpu',
                '[nova_pinning_isolation] has no option sweep_intervl',
                'unknown section [isolation] (did you mean '
                '[nova_pinning_isolation]?)',
                "[nova_pinning] lock_timeout: 'soon' is not a finite "
                'number', 'refuse it: exit 2'):
            self.assertIn(fragment, details)

    def test_a_deprecated_name_is_a_warning_not_unknown(self):
        # An option renamed keeps its old name (CONTRIBUTING.rst): a
        # file still using it is read, and the check says so.
        opts = [cfg.StrOpt('reserved_host_cpus',
                           deprecated_name='reserved_cpus'),
                cfg.IntOpt('old_knob', deprecated_for_removal=True,
                           deprecated_reason='passes need it no more')]
        real = conf_mod.list_opts()
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.conf.list_opts', lambda: [
                (real[0][0], [o for o in real[0][1]
                              if o.name != 'reserved_cpus'] + opts),
                real[1]]))
        self.write_config(pinning='reserved_cpus = 0\nold_knob = 1')
        self.assertCode(Code.WARNING, self.run_check('check_configuration'),
                        '[nova_pinning] reserved_cpus is deprecated: use '
                        '[nova_pinning] reserved_host_cpus',
                        '[nova_pinning] old_knob is deprecated for removal: '
                        'passes need it no more')
        # The commands take the old name too, and read its value.
        checks = self.checks()
        confcheck.check_known_options(checks.conf)
        self.assertEqual('0', checks.conf.nova_pinning.reserved_host_cpus)

    def test_no_file_is_a_warning(self):
        checks = self.checks(os.devnull)
        result = checks.check_configuration()
        self.assertEqual(Code.WARNING, result.code)
        self.assertIn('no configuration file read', result.details)


class TestDriver(ChecksTestCase):

    def driver(self, text, **kw):
        self.write_config(text, **kw)
        return self.run_check('check_driver')

    def test_beside_messagingv2(self):
        self.assertCode(Code.SUCCESS, self.driver(
            '[oslo_messaging_notifications]\ndriver = messagingv2\n'
            'driver = nova_pinning\ntopics = notifications\n'),
            'driver = nova_pinning beside messagingv2')

    def test_beside_messagingv2_of_another_file(self):
        # kolla-ansible's nova.conf and an override: oslo.messaging adds
        # up a multi-valued option's values from every file.
        other = os.path.join(self.tmp, 'nova-compute.conf')
        with open(other, 'w') as f:
            f.write('[oslo_messaging_notifications]\n'
                    'driver = nova_pinning\n')
        self.write_config('[oslo_messaging_notifications]\n'
                          'driver = messagingv2\n')
        self.assertCode(Code.SUCCESS,
                        self.run_check('check_driver', self.config, other),
                        'beside messagingv2')

    def test_alone_where_notifications_were_wanted_is_a_warning(self):
        for text in ('[oslo_messaging_notifications]\ntopics = '
                     'notifications\n', '[notifications]\n'
                     'notify_on_state_change = vm_state\n'):
            self.assertCode(Code.WARNING, self.driver(
                '[oslo_messaging_notifications]\ndriver = nova_pinning\n' +
                text), 'the only notification driver',
                'list both driver lines')

    def test_alone_or_beside_noop(self):
        for drivers in ('nova_pinning', 'noop\ndriver = nova_pinning'):
            self.assertCode(Code.SUCCESS, self.driver(
                '[oslo_messaging_notifications]\ndriver = %s\n' % drivers),
                'driver = nova_pinning alone: no other service')

    def test_absent(self):
        self.assertCode(Code.SUCCESS, self.driver(
            '[oslo_messaging_notifications]\ndriver = messagingv2\n'),
            'nova-compute does not load the package')

    def test_switched_off_is_said(self):
        self.assertCode(Code.SUCCESS, self.driver(
            '[oslo_messaging_notifications]\ndriver = messagingv2\n'
            'driver = nova_pinning\n', pinning='enabled = false'),
            'enabled = false: only the pin filter')


class TestOvercommitFile(ChecksTestCase):

    def test_readable(self):
        self.write_overcommit()
        self.assertCode(Code.SUCCESS, self.run_check('check_overcommit_file'),
                        'version 1, ratio 4 (cpu_allocation_ratio), written '
                        '2026-11-25T12:00:00+00:00')

    def test_a_newer_version_is_refused_in_one_line(self):
        self.write_overcommit(version=2)
        self.assertCode(Code.FAILURE, self.run_check('check_overcommit_file'),
                        'overcommit file %s has unknown version 2'
                        % self.overcommit)

    def test_stale_corrupt_or_a_link_is_a_failure(self):
        self.write_overcommit()
        overcommitfile.set_aside(self.overcommit)
        self.assertCode(Code.FAILURE, self.run_check('check_overcommit_file'),
                        'is stale')
        os.unlink(overcommitfile.stale_path(self.overcommit))
        with open(self.overcommit, 'w') as f:
            f.write('{"version": 1,')
        self.assertCode(Code.FAILURE, self.run_check('check_overcommit_file'),
                        'is corrupt')
        os.unlink(self.overcommit)
        os.symlink('/etc/passwd', self.overcommit)
        self.assertCode(Code.FAILURE, self.run_check('check_overcommit_file'),
                        'symbolic link: not followed')

    def test_absent(self):
        self.assertCode(Code.WARNING, self.run_check('check_overcommit_file'),
                        'none yet; nova-compute writes it at its start')
        self.write_config(pinning='allocation_ratio = 2.0')
        self.assertCode(Code.SUCCESS, self.run_check('check_overcommit_file'),
                        'not used ([nova_pinning] allocation_ratio = 2)')
        self.write_config(pinning='enabled = false')
        self.assertCode(Code.SUCCESS, self.run_check('check_overcommit_file'),
                        'not needed (enabled = false)')


class TestIsolationState(ChecksTestCase):

    def test_none_or_readable(self):
        self.assertCode(Code.SUCCESS, self.run_check('check_isolation_state'),
                        '%s: none' % self.state_file)
        self.write_state()
        self.assertCode(Code.SUCCESS, self.run_check('check_isolation_state'),
                        '%s: version 1' % self.state_file)

    def test_a_newer_version_or_others_file_is_refused(self):
        self.write_state(version=2)
        self.assertCode(Code.FAILURE, self.run_check('check_isolation_state'),
                        '%s: not a version 1 isolation state'
                        % self.state_file)
        self.write_state()
        os.chmod(self.state_file, 0o666)
        self.assertCode(Code.FAILURE, self.run_check('check_isolation_state'),
                        'not trusted')


class TestIsolationStatus(ChecksTestCase):

    def test_none_or_readable(self):
        path = statusfile.path_for(self.state_file)
        self.assertCode(Code.SUCCESS,
                        self.run_check('check_isolation_status'),
                        '%s: none' % path)
        self.publish()
        self.assertCode(Code.SUCCESS,
                        self.run_check('check_isolation_status'),
                        '%s: version 1' % path)

    def test_a_newer_version_is_refused(self):
        self.publish()
        path = statusfile.path_for(self.state_file)
        with open(path) as f:
            doc = json.load(f)
        doc['version'] = 2
        with open(path, 'w') as f:
            json.dump(doc, f)
        self.assertCode(Code.FAILURE,
                        self.run_check('check_isolation_status'),
                        '%s: not a version 1 isolation status' % path)


class TestTextfile(ChecksTestCase):

    def with_textfile(self, text):
        self.write_config(pinning='metrics_textfile = %s' % self.textfile)
        with open(self.textfile, 'w') as f:
            f.write(text)
        return self.run_check('check_textfile')

    @staticmethod
    def exposition(release):
        return ('# HELP nova_pinning_build_info x\n'
                '# TYPE nova_pinning_build_info gauge\n'
                'nova_pinning_build_info{version="%s"} 1.0\n'
                'nova_pinning_up 1.0\n' % release)

    def test_not_configured_or_not_yet_written(self):
        self.assertCode(Code.SUCCESS, self.run_check('check_textfile'),
                        'not configured')
        self.write_config(pinning='metrics_textfile = %s' % self.textfile)
        self.assertCode(Code.SUCCESS, self.run_check('check_textfile'),
                        'none yet')

    def test_written_by_this_release(self):
        ours = version.version_string()
        self.assertCode(Code.SUCCESS,
                        self.with_textfile(self.exposition(ours)),
                        'written by %s' % ours)

    def test_written_by_another_release_is_a_warning(self):
        self.assertCode(Code.WARNING,
                        self.with_textfile(self.exposition('0.9.0')),
                        'written by 0.9.0, this is %s: the next pass '
                        'rewrites it' % version.version_string())
        self.assertCode(Code.WARNING,
                        self.with_textfile('nova_pinning_up 1.0\n'),
                        'written by a release before 1.0.0')

    def test_not_a_textfile_is_a_failure(self):
        self.assertCode(Code.FAILURE, self.with_textfile('{"version": 1}\n'),
                        'is not a Prometheus text exposition')

    def test_a_fifo_is_refused_at_once(self):
        self.write_config(pinning='metrics_textfile = %s' % self.textfile)
        os.mkfifo(self.textfile)
        self.useFixture(Alarm(10))  # a blocking open fails, not hangs
        start = time.monotonic()
        self.assertCode(Code.FAILURE, self.run_check('check_textfile'),
                        'metrics textfile is not a regular file')
        self.assertLess(time.monotonic() - start, 5)


class TestIsolation(ChecksTestCase):

    def test_not_applied(self):
        self.assertCode(Code.SUCCESS, self.run_check('check_isolation'),
                        'not applied')

    def test_applied_and_published(self):
        self.write_state()
        self.publish()
        self.assertCode(Code.SUCCESS, self.run_check('check_isolation'),
                        'applied (systemd, CPUs 0, 0 processes recorded); '
                        'the agent published its status')

    def test_applied_without_a_status_as_1_0_0_left_it(self):
        self.write_state()
        self.assertCode(Code.WARNING, self.run_check('check_isolation'),
                        'the agent published no status',
                        '1.0.0 published none')

    def test_a_stale_status(self):
        self.write_state()
        self.publish(sweep_interval=1)
        path = statusfile.path_for(self.state_file)
        with open(path) as f:
            doc = json.load(f)
        doc['boottime'] -= 10  # ten sweeps ago
        with open(path, 'w') as f:
            json.dump(doc, f)
        self.assertCode(Code.WARNING, self.run_check('check_isolation'),
                        'older than 3 sweeps of 1 s',
                        'is "nova-pinning-isolate watch" running?')

    def test_applied_before_the_last_reboot(self):
        self.write_state()
        self.publish()
        self.boot('6a3c0cfa-0000-4000-8000-000000000002')
        self.assertCode(Code.WARNING, self.run_check('check_isolation'),
                        'before the last reboot, which undid it')

    def test_what_the_agent_could_not_learn(self):
        self.write_state()
        self.publish({'state': 'applied',
                      'backend_error': 'systemd did not answer'})
        self.assertCode(Code.WARNING, self.run_check('check_isolation'),
                        'the agent published "applied": systemd did not '
                        'answer')

    def test_a_status_left_behind_says_applied(self):
        # 1.0.0's undo (after a rollback) leaves this release's status.
        self.publish()
        self.assertCode(Code.WARNING, self.run_check('check_isolation'),
                        'no isolation state, yet %s says "applied"'
                        % statusfile.path_for(self.state_file),
                        '1.0.0 after a rollback')
        self.publish({'state': 'not applied'})
        self.assertCode(Code.SUCCESS, self.run_check('check_isolation'),
                        'not applied')

    def test_a_refused_state_is_not_read_further(self):
        self.write_state(version=2)
        self.assertCode(Code.WARNING, self.run_check('check_isolation'),
                        'not checked: the isolation state is refused')


class TestPinnedGuests(ChecksTestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host

    def pin(self, *names, uri='qemu:///system'):
        """Guests ``names`` pinned live, as a pass pins them."""
        host = virt.Host(uri, host_options())
        self.addCleanup(host.close)
        for name in names:
            dom = self.fake.add_domain(name, 1, xml=hosts.domain_xml(name, 1))
            host.apply([plan_mod.PinChange(
                dom.UUIDString(), name, plan_mod.ChangeKind.VCPU, 0, None,
                cpuset.parse('1'))])

    def test_none(self):
        self.fake.add_domain('fresh', 1, xml=hosts.domain_xml('fresh', 1))
        self.assertCode(Code.SUCCESS, self.run_check('check_pinned_guests'),
                        'no running guest at qemu:///system ([nova_pinning] '
                        'connection_uri) carries a pin of ours')

    def test_pinned_guests_are_a_warning_with_their_count(self):
        self.pin('b', 'a')
        self.write_config('[oslo_messaging_notifications]\n'
                          'driver = messagingv2\ndriver = nova_pinning\n')
        writes = self.fake.writes()
        self.assertCode(Code.WARNING, self.run_check('check_pinned_guests'),
                        '2 running guests at qemu:///system carry pins of '
                        'ours in the live XML: a, b; keep '
                        '[oslo_messaging_notifications] driver = nova_pinning '
                        'until each has restarted', '"Switch it off", step 3')
        self.assertEqual(writes, self.fake.writes())  # read-only

    def test_many_are_counted(self):
        self.pin(*('g%02d' % i for i in range(12)))
        self.assertCode(Code.WARNING, self.run_check('check_pinned_guests'),
                        '12 running guests', 'g09 and 2 more')

    def test_without_the_driver_line_it_says_to_put_it_back(self):
        self.pin('a')
        self.assertCode(Code.WARNING, self.run_check('check_pinned_guests'),
                        '1 running guest at qemu:///system carries',
                        'this configuration has no driver = nova_pinning: '
                        "if it is nova-compute's, put the line back")

    def test_nova_s_libvirt_is_the_one_read(self):
        uri = 'qemu+tcp://127.0.0.1:16510/system'
        other = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'), uri=uri)).host
        self.fake, main = other, self.fake
        self.pin('on-the-second', uri=uri)
        self.fake = main
        self.write_config('[libvirt]\nconnection_uri = %s\n' % uri)
        self.assertCode(Code.WARNING, self.run_check('check_pinned_guests'),
                        'at %s carries' % uri, 'on-the-second')
        # [nova_pinning] connection_uri, when set, wins (as in nova).
        self.write_config('[libvirt]\nconnection_uri = %s\n' % uri,
                          pinning='connection_uri = qemu:///system')
        self.assertCode(Code.SUCCESS, self.run_check('check_pinned_guests'),
                        'at qemu:///system ([nova_pinning] connection_uri)')

    def test_libvirt_unreachable_is_a_warning(self):
        self.fake.down = True
        self.assertCode(Code.WARNING, self.run_check('check_pinned_guests'),
                        'not checked: libvirt at qemu:///system')

    def test_a_hung_libvirt_is_bounded(self):
        self.pin('a')
        release = fakelibvirt.threading.Event()
        self.addCleanup(release.set)
        self.fake.hang['XMLDesc'] = release
        self.write_config(pinning='libvirt_call_timeout = 0.3')
        start = time.monotonic()
        self.assertCode(Code.WARNING, self.run_check('check_pinned_guests'),
                        'not checked', 'did not return within 0.3 s')
        self.assertLess(time.monotonic() - start, 5)

    def test_no_binding(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.libvirtapi.libvirt',
            libvirtapi._Missing()))
        self.assertCode(Code.WARNING, self.run_check('check_pinned_guests'),
                        'not checked: no libvirt binding')

    def test_a_refused_option_is_not_a_crash(self):
        self.write_config(pinning='pass_timeout = soon')
        self.assertCode(Code.WARNING, self.run_check('check_pinned_guests'),
                        "not checked: pass_timeout: 'soon' is not a finite "
                        'number (see "configuration")')


class TestCgroupV1(ChecksTestCase):
    """cgroup v1, deprecated in 1.1.0: a Warning where the isolation
    runs (or was applied) in v1 mode; a temporary cgroup root stands for
    the host's /sys/fs/cgroup."""

    def host(self, unified, systemd=True):
        root = os.path.join(self.tmp, 'cgroup')
        os.makedirs(os.path.join(root, 'cpuset'), exist_ok=True)
        if unified:
            with open(os.path.join(root, 'cgroup.controllers'), 'w') as f:
                f.write('cpuset cpu memory\n')
        run = os.path.join(self.tmp, 'run-systemd')
        if systemd:
            os.makedirs(run, exist_ok=True)
        return root, run

    def check(self, unified, systemd=True, pinning='reserved_cpus = 0',
              isolation=''):
        root, run = self.host(unified, systemd)
        self.write_config(pinning=pinning, isolation='cgroup_root = %s\n%s'
                          % (root, isolation))
        checks = self.checks()
        checks.paths = iso_config.HostPaths(proc=self.proc, systemd_run=run)
        result = checks.check_cgroup_v1()
        self.assertEqual(1, len(result.details.splitlines()), result.details)
        return result.code, result.details

    def test_a_v1_host_is_warned(self):
        self.assertCode(Code.WARNING, self.check(unified=False),
                        'the isolation runs in cgroup v1 mode (cgroup_mode '
                        'auto on a host without cgroup v2 and systemd); '
                        'cgroup v1 is deprecated since 1.1.0 and removed in '
                        '2.0.0')

    def test_a_v2_host_without_systemd_is_v1_and_warned(self):
        self.assertCode(Code.WARNING, self.check(unified=True,
                                                 systemd=False),
                        'cgroup v1 mode')

    def test_v1_chosen_is_warned(self):
        self.assertCode(Code.WARNING, self.check(
            unified=True, isolation='cgroup_mode = v1'),
            '(cgroup_mode v1)', 'removed in 2.0.0')

    def test_a_v2_host_with_systemd(self):
        self.assertCode(Code.SUCCESS, self.check(unified=True),
                        'cgroup_mode auto: systemd')

    def test_no_isolation_on_a_v1_host(self):
        self.assertCode(Code.SUCCESS, self.check(unified=False, pinning=''),
                        'no isolation')

    def test_a_state_applied_in_v1(self):
        # The state 1.0.0 wrote in v1 mode (tests/data/release-1.0.0).
        shutil.copy(os.path.join(os.path.dirname(__file__), os.pardir,
                                 os.pardir, 'data', 'release-1.0.0',
                                 'isolation-v1.json'), self.state_file)
        self.assertEqual('v1', state.load(self.state_file)['mode'])
        self.assertCode(Code.WARNING, self.check(unified=True, pinning=''),
                        'applied in cgroup v1 mode')


class TestChecksTable(testtools.TestCase):

    def test_the_title_names_the_installed_version(self):
        self.assertEqual('nova-pinning-hooks %s upgrade check'
                         % version.version_string(),
                         upgradecheck.Checks.display_title)
        if os.environ.get('NPH_TEST_INSTALLED') == '1':
            from importlib import metadata
            self.assertIn(metadata.version('nova-pinning-hooks'),
                          upgradecheck.Checks.display_title)

    def test_every_check_is_run_in_order(self):
        self.assertEqual(
            ['nova', 'libvirt binding', 'configuration',
             'notification driver', 'overcommit file', 'isolation state',
             'isolation status', 'metrics textfile', 'isolation',
             'cgroup v1', 'pinned guests'],
            [name for name, _ in upgradecheck.Checks._upgrade_checks])
        self.assertEqual(sys.executable, upgradecheck.Checks(
            cfg.ConfigOpts()).python)
