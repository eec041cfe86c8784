"""``nova-pinning plan``: the fixed interface, and bad input."""

import io
import json
import os
import subprocess
import sys

import fixtures
import testtools

from nova_pinning_hooks.cmd import pinning
from nova_pinning_hooks.engine import snapshot
from tests.unit import hosts

EXAMPLE = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'etc',
                       'examples', 'intel-2s-28c-ht.snapshot.json')


def snap(**changes):
    data = snapshot.make(hosts.load('small-1node'), [
        {'xml': hosts.domain_xml('a', 2, uuid='ua'), 'active': True,
         'memory_by_node_kib': {'0': 1048576}},
        {'xml': hosts.domain_xml('b', 1, uuid='ub', pins={0: '3'}),
         'active': True, 'memory_by_node_kib': {'0': 1048576}}],
        4.0, reserved_cpus='0')
    data.update(changes)
    return data


class CliTestCase(testtools.TestCase):

    def run_cli(self, data=None, fmt=None, raw=None, args=None):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'snap.json')
        with open(path, 'w') as f:
            f.write(raw if raw is not None else json.dumps(data))
        argv = args or ['plan', '--snapshot', path]
        if fmt:
            argv += ['--format', fmt]
        out, err = io.StringIO(), io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        # No config file of the machine may leak into the test.
        code = pinning.main(['--config-file', os.devnull] + argv)
        return code, out.getvalue(), err.getvalue()


class TestPlanJson(CliTestCase):

    def test_documented_fields(self):
        code, out, err = self.run_cli(snap(), 'json')
        self.assertEqual(0, code, err)
        data = json.loads(out)
        self.assertEqual(1, data['version'])
        a = {g['name']: g for g in data['guests']}['a']
        for key in ('uuid', 'name', 'mode', 'home_node', 'vcpu_pins',
                    'emulator_pin', 'rule', 'reason'):
            self.assertIn(key, a)
        self.assertEqual('dedicated', a['mode'])
        self.assertEqual({'0', '1'}, set(a['vcpu_pins']))
        # b keeps pCPU 3 (sticky); a gets two of 1-2 plus emulator:
        # a: 2 vCPUs + emulator, b: emulator only.
        self.assertEqual(4, data['changes'])

    def test_table_shows_cpu_map(self):
        code, out, _ = self.run_cli(snap())
        self.assertEqual(0, code)
        self.assertIn('node 0:', out)
        self.assertIn('dedicated', out)
        self.assertIn('rule-2-one-to-one', out)

    def test_example_snapshot_plans(self):
        with open(EXAMPLE) as f:
            code, out, err = self.run_cli(raw=f.read(), fmt='json')
        self.assertEqual(0, code, err)
        modes = {g['mode'] for g in json.loads(out)['guests']}
        self.assertEqual({'dedicated', 'cross-node-range', 'untouched'},
                         modes)


class TestBadInput(CliTestCase):

    CASES = [
        ('malformed domain XML',
         snap(domains=[{'xml': '<domain><name>x', 'active': True}]),
         'malformed'),
        ('malformed capabilities', snap(capabilities='<cap'), 'malformed'),
        ('unknown version', snap(version=2), 'unknown snapshot version 2'),
        ('zero ratio', snap(allocation_ratio=0), 'allocation ratio'),
        ('negative ratio', snap(allocation_ratio=-1), 'allocation ratio'),
        ('ratio not a number', snap(allocation_ratio='4'),
         'allocation_ratio must be a number'),
        ('unknown reserved CPUs', snap(reserved_cpus='0-9'),
         'reserved_cpus names CPUs the host does not have: 4-9'),
        ('unknown shared CPUs', snap(shared_cpus='12'), 'shared_cpus'),
        ('bad CPU set syntax', snap(dedicated_cpus='1-x'), 'dedicated_cpus'),
        ('duplicate uuid', snap(domains=[
            {'xml': hosts.domain_xml('a', 1, uuid='u')},
            {'xml': hosts.domain_xml('b', 1, uuid='u')}]), 'appears twice'),
    ]

    def test_one_clear_message_and_no_partial_plan(self):
        for label, data, fragment in self.CASES:
            for fmt in ('json', 'table'):
                code, out, err = self.run_cli(data, fmt)
                self.assertEqual(2, code, label)
                self.assertEqual('', out, label)
                self.assertEqual(1, len(err.strip().splitlines()),
                                 '%s: %r' % (label, err))
                self.assertIn(fragment, err, label)

    def test_not_json(self):
        code, out, err = self.run_cli(raw='{"version": 1,')
        self.assertEqual((2, ''), (code, out))
        self.assertIn('not valid JSON', err)

    def test_missing_file(self):
        code, out, err = self.run_cli(
            args=['plan', '--snapshot', '/nonexistent/snap.json'])
        self.assertEqual((2, ''), (code, out))
        self.assertIn('cannot read snapshot', err)


class TestConsoleScript(testtools.TestCase):

    def test_exit_status_from_a_real_process(self):
        proc = subprocess.run(
            [sys.executable, '-m', 'nova_pinning_hooks.cmd.pinning',
             '--config-file', os.devnull, 'plan', '--snapshot', EXAMPLE,
             '--format', 'json'], capture_output=True, text=True,
            timeout=60)
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertEqual(1, json.loads(proc.stdout)['version'])

    def test_an_unreachable_libvirtd_is_one_line_on_stderr(self):
        # libvirt's own default error handler used to print its line too
        # ("libvirt: XML-RPC error : Failed to connect socket ...").
        tmp = self.useFixture(fixtures.TempDir()).path
        proc = subprocess.run(
            [sys.executable, '-m', 'nova_pinning_hooks.cmd.pinning',
             '--config-file', os.devnull, 'status', '--connection',
             'qemu+unix:///system?socket=%s/none.sock' % tmp],
            capture_output=True, text=True, timeout=60)
        self.assertEqual((1, ''), (proc.returncode, proc.stdout))
        self.assertEqual(1, len(proc.stderr.splitlines()), proc.stderr)
        self.assertTrue(proc.stderr.startswith(
            'nova-pinning: error: libvirt: Failed to connect socket'),
            proc.stderr)

    def test_a_misspelt_option_or_section_is_2(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        for text, why in (
                ('[nova_pinning]\nreserved_cpu = 0\n',
                 '[nova_pinning] has no option reserved_cpu'),
                ('[pinning]\nreserved_cpus = 0\n',
                 'unknown section [pinning] (did you mean [nova_pinning]?)')):
            path = os.path.join(tmp, 'nph.conf')
            with open(path, 'w') as f:
                f.write(text)
            proc = subprocess.run(
                [sys.executable, '-m', 'nova_pinning_hooks.cmd.pinning',
                 '--config-file', path, 'plan', '--snapshot', EXAMPLE],
                capture_output=True, text=True, timeout=60)
            self.assertEqual((2, ''), (proc.returncode, proc.stdout))
            self.assertEqual('nova-pinning: error: %s: %s\n' % (path, why),
                             proc.stderr)


class TestWhereLogLinesGo(testtools.TestCase):
    """A command logs on stderr (stdout is its output); nova-compute's
    pass worker logs as nova's configuration says, as nova does."""

    def test_commands_log_on_stderr(self):
        for argv in (['agent'], ['status'], ['plan', '--snapshot', 'x.json']):
            self.assertTrue(pinning.parse_args(argv).use_stderr, argv)

    def test_nova_computes_pass_worker_follows_novas_configuration(self):
        argv = ['agent', '--connection', 'qemu:///system',
                '--requests-on-stdin']
        self.assertFalse(pinning.parse_args(argv).use_stderr)
        path = self.useFixture(fixtures.TempDir()).join('nova.conf')
        with open(path, 'w') as f:
            f.write('[DEFAULT]\nuse_stderr = true\n')
        self.assertTrue(
            pinning.parse_args(['--config-file', path] + argv).use_stderr)
