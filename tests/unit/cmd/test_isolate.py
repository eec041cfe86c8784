"""``nova-pinning-isolate``: exit statuses, messages, status text."""

import functools
import io
import json
import os
import socket
import sys
import time

import fixtures
import testtools

from nova_pinning_hooks.cmd import isolate
from nova_pinning_hooks.isolation import kernelwork
from nova_pinning_hooks.isolation import report
from nova_pinning_hooks.isolation import state
from tests.unit.isolation import fakehost
from tests.unit.isolation import test_systemd
from tests.unit.isolation.test_kernelwork import PinsCase


class TestCli(testtools.TestCase):
    """The command on a configuration file. No config fixture here:
    oslo.config shares overrides between ConfigOpts objects that
    register the same OptGroup objects, and they would win over the
    file."""

    def setUp(self):
        super().setUp()
        self.host = self.useFixture(fakehost.FakeHost())
        self.state_file = os.path.join(self.host.top, 'state', 'iso.json')

    def run_cli(self, *args, reserved='0', extra='',
                section='nova_pinning_isolation'):
        cfgfile = os.path.join(self.host.top, 'nph.conf')
        with open(cfgfile, 'w') as f:
            f.write('[nova_pinning]\n%s\n[%s]\n'
                    'cgroup_mode = v1\ncgroup_root = %s\nstate_file = %s\n'
                    'pidfile_dirs =\n%s'
                    % ('reserved_cpus = %s' % reserved if reserved else '',
                       section, self.host.cgroot, self.state_file, extra))
        out, err = io.StringIO(), io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        code = isolate.main(['--config-file', cfgfile] + list(args))
        return code, out.getvalue(), err.getvalue()

    def test_refused_configuration(self):
        code, out, err = self.run_cli('apply', reserved='0-4095')
        self.assertEqual((2, ''), (code, out))
        self.assertEqual(1, len(err.splitlines()))
        self.assertIn('does not have', err)
        self.assertFalse(os.path.exists(self.state_file))

    def test_unknown_sections_and_options_are_refused(self):
        # oslo.config ignores them: a misspelt section made apply confine
        # every process with defaults.
        for kw, why in (
                ({'section': 'isolation'}, 'unknown section [isolation] '
                 '(did you mean [nova_pinning_isolation]?)'),
                ({'section': 'nova_pining_isolation'}, 'unknown section '
                 '[nova_pining_isolation] (did you mean '
                 '[nova_pinning_isolation]?)'),
                ({'extra': 'sweep_intervl = 3\n'}, '[nova_pinning_isolation] '
                 'has no option sweep_intervl'),
                ({'extra': '[nova_pinning]\nreserved_cpu = 1\n'},
                 '[nova_pinning] has no option reserved_cpu')):
            for command in ('apply', 'status', 'undo'):
                code, out, err = self.run_cli(command, **kw)
                self.assertEqual((2, ''), (code, out), (kw, command))
                self.assertEqual(1, len(err.splitlines()), err)
                self.assertIn(why, err, (kw, command))
                self.assertFalse(os.path.exists(self.state_file))

    def test_other_sections_are_left_alone(self):
        # Our options may live in nova.conf, beside nova's own sections.
        code, out, err = self.run_cli(
            'apply', extra='[libvirt]\nvirt_type = kvm\n[DEFAULT]\n'
                           'transport_url = rabbit://\n')
        self.assertEqual(0, code, err)

    def test_status_when_not_configured(self):
        code, out, _ = self.run_cli('status', reserved=None)
        self.assertEqual(0, code)
        self.assertIn('state: not configured', out)
        self.assertIn('reserved_cpus is not set', out)

    def test_undo_with_nothing_applied(self):
        self.assertEqual((0, 'nothing to undo\n', ''),
                         self.run_cli('undo', reserved=None))

    def test_busy_lock_fails_and_changes_nothing(self):
        with state.Lock(self.state_file):
            code, _, err = self.run_cli('apply')
        self.assertEqual(1, code)
        self.assertIn('another nova-pinning-isolate', err)
        self.assertFalse(os.path.exists(self.state_file))
        self.assertFalse(os.path.exists(self.host.group_dir(
            'nova-pinning-host')))


class TestStatusText(testtools.TestCase):

    def test_v1(self):
        text = isolate.status_text({
            'state': 'applied', 'mode': 'v1', 'reserved_cpus': '0',
            'applied_mode': 'v1', 'applied_cpus': '0',
            'recorded_processes': 3, 'group': '/sys/fs/cgroup/cpuset/h',
            'group_exists': True, 'group_cpus': '0', 'confined': 3,
            'not_confined': 1, 'kept': {'init': 1, 'kernel thread': 80}})
        self.assertEqual(
            'state: applied\nmode: v1\nreserved CPUs: 0\n'
            'applied: v1 on CPUs 0, 3 processes recorded\n'
            'group: /sys/fs/cgroup/cpuset/h (CPUs 0)\n'
            'processes confined: 3, not confined: 1\n'
            'never moved: init 1, kernel thread 80\n', text)

    def test_systemd(self):
        text = isolate.status_text({
            'state': 'applied', 'mode': 'systemd', 'reserved_cpus': '0',
            'slices': {'system.slice': {'AllowedCPUs': '0',
                                        'EffectiveCPUs': '0'},
                       'machine.slice': {'AllowedCPUs': '',
                                         'EffectiveCPUs': '0-3'}},
            'confined': 1, 'not_confined': 0})
        self.assertIn('machine.slice: AllowedCPUs= EffectiveCPUs=0-3\n'
                      'system.slice: AllowedCPUs=0 EffectiveCPUs=0\n'
                      'units confined: 1, not confined: 0\n', text)


class TestStatus(PinsCase):
    """The status of interrupts and kernel work as the command prints it
    (the rest of them: tests/unit/isolation/test_kernelwork.py)."""

    def test_counts_interrupts_on_one_to_one_cpus(self):
        self.one_to_one_guest()
        self.host.interrupts({24: {0: 10}, 28: {2: 100}})
        self.isolator().apply()
        kernelwork._LAST.clear()
        self.addCleanup(kernelwork._LAST.clear)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.kernelwork._sleep', lambda s:
            self.host.interrupts({24: {0: 20}, 28: {2: 150, 3: 1}})))
        st = report.status(self.options(), self.host.paths)
        self.assertEqual('2-3', st['one_to_one_cpus'])
        self.assertEqual({'28': 51}, st['irqs_firing_on_one_to_one'])
        self.assertEqual((4, 1, 1), (st['irqs_moved'], st['irqs_refused'],
                                     st['irqs_on_one_to_one']))
        self.assertEqual('0-1', st['workqueue_cpus'])
        text = isolate.status_text(st)
        self.assertIn('one-to-one CPUs: 2-3\n', text)
        self.assertIn('interrupts: 4 moved, 1 refused by the kernel, 1 '
                      'still allowed on one-to-one CPUs\n', text)
        self.assertIn('interrupts firing on one-to-one CPUs in ', text)
        self.assertIn(': 1 (28: 51)\n', text)


class StatusCli(testtools.TestCase):
    """``nova-pinning-isolate status`` in systemd mode, on the fake host
    (its paths given to ``report``: the command uses the real host's)."""

    def setUp(self):
        super().setUp()
        self.host = self.useFixture(fakehost.FakeHost())
        with open(os.path.join(self.host.cgroot, 'cgroup.controllers'),
                  'w') as f:
            f.write('cpuset cpu io memory pids\n')
        self.state_file = os.path.join(self.host.top, 'state', 'iso.json')
        for name in ('status', 'published'):
            self.useFixture(fixtures.MonkeyPatch(
                'nova_pinning_hooks.isolation.report.' + name,
                functools.partial(getattr(report, name),
                                  paths=self.host.paths)))

    extra = ''  # more of [nova_pinning_isolation]

    def run_cli(self, *args):
        cfgfile = os.path.join(self.host.top, 'nph.conf')
        with open(cfgfile, 'w') as f:
            f.write('[nova_pinning]\nreserved_cpus = 0\n'
                    '[nova_pinning_isolation]\ncgroup_mode = systemd\n'
                    'cgroup_root = %s\nstate_file = %s\n'
                    'interrupt_sample_seconds = 0\n%s'
                    % (self.host.cgroot, self.state_file, self.extra))
        out, err = io.StringIO(), io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        code = isolate.main(['--config-file', cfgfile] + list(args))
        return code, out.getvalue(), err.getvalue()


class TestStatusAgainstAHungBus(StatusCli):
    """issue 40, M-1 and L-6: against a bus that accepts and never
    answers, status took 121 s (4 units, 30 s each, one reconnection
    after another) and exited 0. Now one total deadline
    (``status_timeout``, 5 s), the units after the first that did not
    answer not asked, and exit 1."""

    def test_status_ends_by_its_deadline_and_fails(self):
        # No systemctl: the D-Bus path. A socket that takes connections
        # and never answers, not even the authentication.
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', self.useFixture(fixtures.TempDir()).path))
        path = self.host.paths.system_bus
        os.makedirs(os.path.dirname(path))
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        listener.listen(16)
        self.addCleanup(listener.close)
        start = time.monotonic()
        code, out, err = self.run_cli('status')
        took = time.monotonic() - start
        self.assertLess(took, 5 + 2)
        self.assertEqual(1, code, (out, err))
        # systemd's own socket is not there (a container without the
        # mount): one warning saying so, then the error.
        self.assertEqual(2, len(err.splitlines()), err)
        self.assertIn("systemd's own socket %s cannot be reached"
                      % self.host.paths.systemd_private, err.splitlines()[0])
        self.assertIn('nova-pinning-isolate: error: systemd answered for 0 '
                      'of 4 units: D-Bus LoadUnit through %s' % path, err)
        self.assertIn('init.scope: error=not asked: D-Bus LoadUnit', out)
        self.assertIn('units confined: 0, not confined: 3', out)


class SystemctlCli(StatusCli):
    """Through a fake systemctl (tests/unit/isolation/test_systemd.py's).
    """

    def setUp(self):
        super().setUp()
        bin_dir = os.path.join(self.host.top, 'bin')
        os.makedirs(bin_dir)
        self.units_path = os.path.join(self.host.top, 'units.json')
        self.set_units(test_systemd.SLICES + ('machine.slice',))
        script = os.path.join(bin_dir, 'systemctl')
        with open(script, 'w') as f:
            f.write(test_systemd.FAKE.format(
                python=sys.executable, units=self.units_path,
                log=os.path.join(self.host.top, 'systemctl.log')))
        os.chmod(script, 0o755)
        self.useFixture(fixtures.EnvironmentVariable('PATH', bin_dir))

    def set_units(self, names):
        with open(self.units_path, 'w') as f:
            json.dump({u: {} for u in names}, f)


class TestStatusExitStatus(SystemctlCli):
    """Exit 0 when systemd answered for every unit, 1 when not."""

    def test_0_when_systemd_answers_1_when_not(self):
        code, out, err = self.run_cli('status')
        self.assertEqual((0, ''), (code, err))
        self.assertIn('units confined: 0, not confined: 3\n', out)
        self.assertIn('agent status: no status from the isolation agent',
                      out)
        self.assertEqual(0, self.run_cli('apply')[0])
        code, out, err = self.run_cli('status')
        self.assertEqual((0, ''), (code, err))
        self.assertIn('units confined: 3, not confined: 0\n', out)
        self.assertIn('agent status: applied, published ', out)
        self.assertIn(' s ago (a sweep every 30 s)\n', out)
        code, out, err = self.run_cli('status', '--format', 'json')
        self.assertEqual(0, code)
        agent = json.loads(out)['agent']
        self.assertEqual(('applied', False),
                         (agent['state'], agent['status_stale']))
        # A unit systemd does not know: what it says, and exit 1.
        self.set_units(('system.slice', 'init.scope', 'machine.slice'))
        code, out, err = self.run_cli('status')
        self.assertEqual(1, code)
        self.assertIn('user.slice: error=', out)
        self.assertTrue(err.startswith(
            'nova-pinning-isolate: error: systemd answered for 3 of 4 '
            'units: '), err)
        self.assertIn('Unit user.slice not found.', err)
        self.assertEqual(1, len(err.splitlines()), err)


class TestConfigFilesThatAreNotFiles(testtools.TestCase):

    def test_a_fifo_or_device_config_is_refused_at_once(self):
        from tests.unit.host.test_safefs import Alarm
        self.useFixture(Alarm(10))
        tmp = self.useFixture(fixtures.TempDir()).path
        fifo = os.path.join(tmp, 'fifo.conf')
        os.mkfifo(fifo)
        for path in (fifo, '/dev/zero'):
            out, err = io.StringIO(), io.StringIO()
            with fixtures.MonkeyPatch('sys.stdout', out), \
                    fixtures.MonkeyPatch('sys.stderr', err):
                code = isolate.main(['--config-file', path, 'status'])
            self.assertEqual((2, ''), (code, out.getvalue()))
            self.assertIn('not a regular file', err.getvalue())
            self.assertEqual(1, len(err.getvalue().splitlines()))


class TestBadConfigurationValues(testtools.TestCase):

    CASES = [
        ('[nova_pinning_isolation]\nsweep_interval = often\n',
         'sweep_interval'),
        ('[nova_pinning_isolation]\nmemory_limit_mib = 1e9\n',
         'memory_limit_mib'),
        ('[nova_pinning]\nbusy_retry_delay = nan\n', 'finite'),
        # int() alone reads it as 3; Event.wait cannot take 10**20.
        ('[nova_pinning_isolation]\nsweep_interval = \u0663\n',
         'not an integer'),
        ('[nova_pinning_isolation]\nsweep_interval = 100000000000000000000\n',
         'sweep_interval'),
        ('[nova_pinning_isolation]\nonly_descendants_of = 99999999999\n',
         'only_descendants_of'),
        ('[nova_pinning_isolation]\ncgroup_mode = v3\n', 'cgroup_mode'),
        ('[DEFAULT]\ndebug = maybe\n', 'debug'),
    ]

    def test_every_command_refuses_a_bad_value_in_one_line(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'bad.conf')
        for text, fragment in self.CASES:
            with open(path, 'w', encoding='utf-8') as f:
                f.write(text)
            for command in (['apply'], ['watch'], ['undo'], ['status'],
                            ['status', '--format', 'json']):
                out, err = io.StringIO(), io.StringIO()
                with fixtures.MonkeyPatch('sys.stdout', out), \
                        fixtures.MonkeyPatch('sys.stderr', err):
                    code = isolate.main(['--config-file', path] + command)
                label = '%s %s' % (text.strip(), command)
                self.assertEqual((2, ''), (code, out.getvalue()), label)
                self.assertEqual(1, len(err.getvalue().splitlines()),
                                 '%s: %r' % (label, err.getvalue()))
                self.assertIn(fragment, err.getvalue(), label)
                self.assertNotIn('Traceback', err.getvalue(), label)

    def test_command_line_errors_are_one_line(self):
        for argv in (['status', '--format', 'yaml'], ['bogus'], []):
            out, err = io.StringIO(), io.StringIO()
            with fixtures.MonkeyPatch('sys.stdout', out), \
                    fixtures.MonkeyPatch('sys.stderr', err):
                code = isolate.main(['--config-file', os.devnull] + argv)
            self.assertEqual((2, ''), (code, out.getvalue()), argv)
            self.assertEqual(1, len(err.getvalue().splitlines()),
                             '%s: %r' % (argv, err.getvalue()))


class TestStatusOnASlowSystemd(SystemctlCli):
    """issue 47: a systemd that answers slowly but answers, as in a
    loaded VM (``systemctl show`` over 1 s a unit). Before: one
    deadline for all units (``status_timeout``) left too little to the
    third unit, which was unknown, and status exited 1. Now each unit
    has ``status_timeout``: every unit answered, exit 0; a hung bus
    still costs one bound (``TestStatusAgainstAHungBus``)."""

    extra = 'status_timeout = 2\n'

    def test_a_full_answer_and_exit_0(self):
        with open(self.units_path + '.delay', 'w') as f:
            f.write('1.0')
        start = time.monotonic()
        code, out, err = self.run_cli('status', '--format', 'json')
        took = time.monotonic() - start
        self.assertEqual((0, ''), (code, err))
        st = json.loads(out)
        self.assertEqual((0, 3), (st['units_unknown'], st['not_confined']))
        # Four units of 1 s each, none waited beyond its own bound.
        self.assertGreater(took, 4)
        self.assertLess(took, 4 * 2)


class TestStatusThatLearnedNothing(SystemctlCli):
    """issue 48, R5-L3: status exited 0 when it could not say anything.
    """

    def test_an_unknown_state_is_exit_1(self):
        os.makedirs(os.path.dirname(self.state_file))
        with open(self.state_file, 'w') as f:
            f.write('{not json')
        os.chmod(self.state_file, 0o600)
        code, out, err = self.run_cli('status')
        self.assertEqual(1, code, (out, err))
        self.assertIn('state: unknown\n', out)
        self.assertTrue(err.startswith(
            'nova-pinning-isolate: error: isolation state unknown: '), err)
        self.assertEqual(1, len(err.splitlines()), err)

    def test_applied_with_no_systemctl_and_no_bus_is_exit_1(self):
        self.assertEqual(0, self.run_cli('apply')[0])
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', self.useFixture(fixtures.TempDir()).path))
        code, out, err = self.run_cli('status')
        self.assertEqual(1, code, (out, err))
        self.assertIn('state: applied\n', out)
        self.assertIn('isolation is applied, but the host was not asked: '
                      'cgroup_mode systemd: no systemctl on PATH, no '
                      'systemd socket', err)
        self.assertEqual(1, len(err.splitlines()), err)
