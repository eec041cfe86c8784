"""``nova-pinning-status upgrade check``: the command, its output and
its exit status (oslo.upgradecheck's codes; bad input 2; 255 when a
check itself fails)."""

import io
import json
import os

import fixtures

from nova_pinning_hooks.cmd import status
from nova_pinning_hooks.cmd import upgradecheck
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.host import virt
from tests import fakenova
from tests.fixtures import FakeLibvirtFixture
from tests.fixtures import host_options
from tests.unit import hosts
from tests.unit.cmd import test_upgradecheck
from tests.unit.host.test_safefs import Alarm

NAMES = ['nova', 'libvirt binding', 'configuration', 'notification driver',
         'overcommit file', 'isolation state', 'isolation status',
         'metrics textfile', 'isolation', 'cgroup v1', 'pinned guests']


class StatusTestCase(test_upgradecheck.ChecksTestCase):
    """A host where every check passes: nova-compute's configuration
    with both driver lines, its overcommit file, nova 34 in the
    Python the probe runs, libvirt with one guest not pinned."""

    def setUp(self):
        super().setUp()
        self.useFixture(Alarm(60))
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        self.fake.add_domain('a', 1, xml=hosts.domain_xml('a', 1))
        top = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(
            'PYTHONPATH', fakenova.make(top)))
        self.write_config('[oslo_messaging_notifications]\n'
                          'driver = messagingv2\ndriver = nova_pinning\n')
        self.write_overcommit()
    def run_cli(self, *argv, config=None):
        out, err = io.StringIO(), io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        code = status.main(['--config-file', config or self.config] +
                           list(argv))
        return code, out.getvalue(), err.getvalue()

    def assertRefused(self, result, fragment):
        code, out, err = result
        self.assertEqual((2, ''), (code, out), err)
        self.assertEqual(1, len(err.splitlines()), err)
        self.assertIn('nova-pinning-status: error: ', err)
        self.assertIn(fragment, err)
        self.assertNotIn('Traceback', err)


class TestExitStatus(StatusTestCase):

    def test_every_check_passed_is_0(self):
        code, out, err = self.run_cli('upgrade', 'check')
        self.assertEqual(0, code, out + err)
        for name in NAMES:
            self.assertIn('Check: %s ' % name, out)
        self.assertEqual(len(NAMES), out.count('Result: Success'), out)

    def test_a_warning_is_1(self):
        host = virt.Host('qemu:///system', host_options())
        self.addCleanup(host.close)
        dom = self.fake.by_name('a')
        host.apply([plan_mod.PinChange(dom.UUIDString(), 'a',
                                       plan_mod.ChangeKind.VCPU, 0,
                                       None, cpuset.parse('1'))])
        code, out, _ = self.run_cli('upgrade', 'check')
        self.assertEqual(1, code, out)
        self.assertEqual(1, out.count('Result: Warning'), out)

    def test_a_failure_is_2(self):
        self.write_overcommit(version=2)
        code, out, _ = self.run_cli('upgrade', 'check')
        self.assertEqual(2, code, out)
        self.assertIn('Result: Failure', out)

    def test_json(self):
        self.write_overcommit(version=2)
        code, out, err = self.run_cli('upgrade', 'check', '--json')
        self.assertEqual(2, code, err)
        doc = json.loads(out)
        self.assertEqual(NAMES, [c['check'] for c in doc['checks']])
        results = {c['check']: c['result'] for c in doc['checks']}
        self.assertEqual(2, results['overcommit file'])
        self.assertEqual(0, results['nova'])
        self.assertIn('has unknown version 2', doc['checks'][4]['details'])


class TestBadInput(StatusTestCase):

    def test_command_line(self):
        for argv, fragment in (
                ((), 'required: command'),
                (('upgrade',), 'required: check'),
                (('upgrade', 'chek'), 'the command is "upgrade check"'),
                (('upgrade', 'check', '--jsn'), 'unrecognized arguments'),
                (('--no-such-flag', 'upgrade', 'check'),
                 'unrecognized arguments')):
            self.assertRefused(self.run_cli(*argv), fragment)

    def test_configuration_files(self):
        fifo = os.path.join(self.tmp, 'fifo.conf')
        os.mkfifo(fifo)
        self.assertRefused(self.run_cli('upgrade', 'check', config=fifo),
                           'configuration file is not a regular file')
        with open(self.config, 'w') as f:
            f.write('[nova_pinning\nreserved_cpus = 0\n')
        self.assertRefused(self.run_cli('upgrade', 'check'), 'nova.conf')
        self.assertRefused(self.run_cli(
            'upgrade', 'check', config=os.path.join(self.tmp, 'none.conf')),
            'none.conf')


class TestInternalError(StatusTestCase):

    def broken(self):
        def boom(checks):
            raise RuntimeError('a bug\nwith two lines')
        checks = list(upgradecheck.Checks._upgrade_checks)
        checks[1] = ('libvirt binding', boom)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.cmd.upgradecheck.Checks._upgrade_checks',
            tuple(checks)))

    def test_is_255_in_one_line(self):
        self.broken()
        code, out, err = self.run_cli('upgrade', 'check')
        self.assertEqual((255, ''), (code, out))
        self.assertEqual(['nova-pinning-status: error: RuntimeError: a bug'],
                         err.splitlines())

    def test_with_debug_the_traceback(self):
        self.broken()
        code, out, err = self.run_cli('--debug', 'upgrade', 'check')
        self.assertEqual((255, ''), (code, out))
        self.assertIn('Traceback', err)
