"""Hostile and careless input: one clear error, never a traceback, never
partial output; bounded memory and time.

Every case runs through the command's ``main`` (``nova-pinning plan``):
exit status 2, exactly one line on stderr, nothing on stdout, no
traceback, in both output formats.
"""

import json
import os
import resource
import subprocess
import sys
import time

import fixtures
import testtools

from nova_pinning_hooks.engine import cpuset
from tests.unit import hosts
from tests.unit.cmd.test_cli import CliTestCase
from tests.unit.cmd.test_cli import snap
from tests.unit.cmd.test_cli_live import LiveCliTestCase

TOP = os.path.join(os.path.dirname(__file__), '..', '..', '..')


def raw_snap(**changes):
    return json.dumps(snap(**changes))


def with_domain(xml, **fields):
    dom = {'xml': xml, 'active': True}
    dom.update(fields)
    return raw_snap(domains=[dom])


DOMAIN = hosts.domain_xml('h', 2, uuid='uh')
VCPU2 = "<vcpu placement='static'>2</vcpu>"
HOST = hosts.load('small-1node')


class TestOneClearError(CliTestCase):

    CASES = [
        ('deeply nested JSON', '[' * 200000 + ']' * 200000, 'nested'),
        ('integer too large for a float',
         raw_snap().replace('"allocation_ratio": 4.0',
                            '"allocation_ratio": 1' + '0' * 400),
         'out of range'),
        ('infinite ratio', raw_snap().replace(
            '"allocation_ratio": 4.0', '"allocation_ratio": 1e999'),
         "number '1e999' is out of range"),
        ('integer with 5000 digits', raw_snap().replace(
            '"allocation_ratio": 4.0', '"allocation_ratio": 1' + '0' * 5000),
         'out of range'),
        ('non-ASCII digit in a CPU set', raw_snap(reserved_cpus='\u0663'),
         'invalid CPU number'),
        ('superscript digit in a CPU set', raw_snap(reserved_cpus='\u00b2'),
         'invalid CPU number'),
        ('underscore in a CPU number', raw_snap(reserved_cpus='1_0'),
         'invalid CPU number'),
        ('non-ASCII digit in capabilities', raw_snap(
            capabilities=HOST.replace("<cpu id='1'", "<cpu id='\u0661'")),
         'numeric id'),
        ('non-ASCII digit in a pin', with_domain(DOMAIN.replace(
            '</domain>', "<cputune><vcpupin vcpu='0' cpuset='\u0661'/>"
            "</cputune></domain>")), 'invalid CPU number'),
        ('memory that overflows', with_domain(DOMAIN.replace(
            '>1048576<', '>99999999999999999999999999<')), 'memory'),
        ('a string as active', with_domain(DOMAIN, active='false'),
         'active must be true or false'),
        ('true as version', raw_snap(version=True),
         'unknown snapshot version'),
        ('a string as KiB', with_domain(
            DOMAIN, memory_by_node_kib={'0': '5'}), 'KiB'),
        ('a non-ASCII node', with_domain(
            DOMAIN, memory_by_node_kib={'\u0660': 5}), 'invalid number'),
        ('vCPUs beyond what libvirt allows', with_domain(
            DOMAIN.replace(VCPU2, VCPU2.replace('>2<', '>200000000<'))),
         'more than 4096'),
        ('I/O threads beyond reason', with_domain(DOMAIN.replace(
            '</domain>', '<iothreads>100000000</iothreads></domain>')),
         'more than 1024'),
        ('one range repeated 20,000 times', raw_snap(
            reserved_cpus=','.join(['0-3'] * 20000)), 'too long'),
        ('a vCPU pin for a vCPU the guest lacks', with_domain(
            DOMAIN.replace('</domain>', "<cputune><vcpupin vcpu='9' "
                           "cpuset='1'/></cputune></domain>")),
         'vcpupin'),
        # JSON beyond what is accepted, wherever it is in the document.
        ('NaN anywhere', raw_snap()[:-1] + ', "extra": NaN}',
         'NaN is not a number'),
        ('Infinity anywhere', raw_snap()[:-1] + ', "extra": -Infinity}',
         'Infinity is not a number'),
        ('a key given twice', raw_snap()[:-1] + ', "version": 1}',
         "key 'version' appears twice"),
        ('nested 40 levels deep', raw_snap()[:-1] + ', "extra": ' +
         '[' * 40 + ']' * 40 + '}', 'nested deeper than 32'),
        ('a lone surrogate', raw_snap(domains=[{
            'xml': DOMAIN.replace('<name>h<', '<name>@SURROGATE@<')}]
         ).replace('@SURROGATE@', '\\ud800'), 'lone surrogate'),
        ('an integer beyond 64 bits', raw_snap()[:-1] +
         ', "extra": 18446744073709551616}', 'out of range'),
        # Host limits: Linux's nodes, cores of at most 32 threads.
        ('a NUMA cell beyond Linux', raw_snap(
            capabilities=HOST.replace("<cell id='0'", "<cell id='5000'")),
         'at most 1023'),
        ('a core of 40 threads', raw_snap(
            capabilities=hosts.capabilities([[list(range(40))]])),
         'names more than 32 CPUs'),
        ('a memory node beyond Linux', with_domain(
            DOMAIN, memory_by_node_kib={'5000': 5}), '5000 is more than 1023'),
        ('non-ASCII digit in a NUMA node set', with_domain(DOMAIN.replace(
            '</domain>', "<numatune><memory mode='strict' nodeset='\u0660'/>"
            "</numatune></domain>")), 'invalid CPU number'),
    ]

    def test_each_case(self):
        self.assertIn(VCPU2, DOMAIN)
        self.assertIn('>1048576<', DOMAIN)
        for label, text, fragment in self.CASES:
            for fmt in ('json', 'table'):
                code, out, err = self.run_cli(raw=text, fmt=fmt)
                self.assertEqual((2, ''), (code, out), '%s: %s' % (label,
                                                                   err))
                self.assertEqual(1, len(err.strip().splitlines()),
                                 '%s: %r' % (label, err))
                self.assertIn(fragment, err, label)
                self.assertNotIn('Traceback', err, label)

    def test_the_host_fixtures_hold_what_the_cases_replace(self):
        self.assertIn("<cell id='0'", HOST)
        self.assertIn('<name>h<', DOMAIN)

    def test_command_line_errors_are_one_line(self):
        for argv in (['plan', '--snapshot', 'x', '--format', 'yaml'],
                     ['plan'], ['no-such-command'], ['--no-such-flag']):
            code, out, err = self.run_cli(args=argv)
            self.assertEqual((2, ''), (code, out), argv)
            self.assertEqual(1, len(err.strip().splitlines()),
                             '%s: %r' % (argv, err))
            self.assertTrue(err.startswith('nova-pinning: error: '), err)

    def test_invalid_utf8(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'bad.json')
        with open(path, 'wb') as f:
            f.write(b'{"version": 1, "x": "\xff\xfe"}')
        code, out, err = self.run_cli(args=['plan', '--snapshot', path])
        self.assertEqual((2, ''), (code, out))
        self.assertIn('not UTF-8', err)


class TestBadConfigurationValues(LiveCliTestCase):
    """A bad value in a configuration file: exit 2 before anything runs,
    for every command (oslo.config reads values lazily)."""

    def test_each_value_and_command(self):
        cases = [('busy_retry_delay', 'inf', 'finite'),
                 ('coalesce_delay', 'nan', 'finite'),
                 ('busy_retries', 'many', 'busy_retries'),
                 ('allocation_ratio', 'x', 'allocation_ratio'),
                 ('pass_timeout', '1e999', 'finite'),
                 # int() and float() alone read these as 3 and 4.0.
                 ('busy_retries', '\u0663', "'\u0663' is not an integer"),
                 ('allocation_ratio', '\u0664', 'not a finite number'),
                 ('busy_retries', '1_000', 'not an integer'),
                 # Finite, but no sleep or wait can take them.
                 ('busy_retry_delay', '1e300', 'busy_retry_delay'),
                 ('lock_timeout', '1e300', 'lock_timeout'),
                 ('periodic_interval', '10' * 10, 'periodic_interval'),
                 ('allocation_ratio', '1e300', 'allocation_ratio')]
        example = os.path.join(TOP, 'etc', 'examples',
                               'intel-2s-28c-ht.snapshot.json')
        for option, value, fragment in cases:
            options = {'allocation_ratio': 4.0, option: value}
            with open(self.config, 'w', encoding='utf-8') as f:
                f.write('[nova_pinning]\nlock_path = %s\n' % self.tmp)
                for key, val in sorted(options.items()):
                    f.write('%s = %s\n' % (key, val))
            for argv in (['status'], ['rebind'],
                         ['plan', '--snapshot', example]):
                code, out, err = self.run_cli(*argv)
                label = '%s=%s %s' % (option, value, argv[0])
                self.assertEqual((2, ''), (code, out), label + err)
                self.assertEqual(1, len(err.strip().splitlines()),
                                 label + err)
                self.assertIn(fragment, err, label)
                self.assertNotIn('Traceback', err, label)
        self.assertEqual(0, self.fake.writes())

    def test_a_bad_value_for_a_command_line_option(self):
        with open(self.config, 'w') as f:
            f.write('[DEFAULT]\ndebug = maybe\n')
        code, out, err = self.run_cli('status')
        self.assertEqual((2, ''), (code, out), err)
        self.assertEqual(['nova-pinning: error: argument --debug: Invalid '
                          'Boolean value: maybe'], err.strip().splitlines())

    def test_invalid_utf8_in_a_config_file(self):
        with open(self.config, 'wb') as f:
            f.write(b'[nova_pinning]\nreserved_cpus = \xff\n')
        code, out, err = self.run_cli('status')
        self.assertEqual((2, ''), (code, out), err)
        self.assertEqual(1, len(err.strip().splitlines()), err)


class TestUnexpectedFailure(LiveCliTestCase):

    def test_one_line_and_a_traceback_only_with_debug(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.observe.render.plan_table',
            lambda *a, **k: {}['surprise']))
        code, out, err = self.run_cli('status')
        self.assertEqual((1, ''), (code, out))
        self.assertEqual(["nova-pinning: error: KeyError: 'surprise'"],
                         err.strip().splitlines())
        code, out, err = self.run_cli('--debug', 'status')
        self.assertEqual((1, ''), (code, out))
        self.assertIn('Traceback', err)


class TestOvercommitFile(LiveCliTestCase):
    """The overcommit file is read with the same strict JSON rules."""

    def test_each_case(self):
        path = os.path.join(self.tmp, 'overcommit.json')
        good = '{"version": 1, "allocation_ratio": 4.0}'
        self.write_config(overcommit_file=path)
        for label, text, fragment in [
                ('true as version', good.replace('1,', 'true,'),
                 'unknown version True'),
                ('a ratio too large for a float', good.replace(
                    '4.0', '1' + '0' * 400), 'out of range'),
                ('nested too deep', good[:-1] + ', "x": ' + '[' * 100000 +
                 ']' * 100000 + '}', 'nested deeper'),
                ('NaN', good.replace('4.0', 'NaN'), 'NaN'),
                ('not UTF-8', good.replace('4.0', '"\udcff"').encode(
                    'utf-8', 'surrogateescape'), 'UTF-8')]:
            with open(path, 'wb') as f:
                f.write(text if isinstance(text, bytes) else
                        text.encode('utf-8'))
            for command in ('status', 'rebind'):
                code, out, err = self.run_cli(command)
                self.assertEqual((2, ''), (code, out), '%s: %s' % (label,
                                                                   err))
                self.assertEqual(1, len(err.strip().splitlines()),
                                 '%s: %r' % (label, err))
                self.assertIn(fragment, err, label)
        self.assertEqual(0, self.fake.writes())


class TestLogRecords(LiveCliTestCase):
    """A log record carries its exception in its one line; the
    traceback only with --debug."""

    def test_an_exception_logged_inside_a_pass(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.engine.policy.make_plan',
            lambda *a, **k: {}['surprise']))
        code, out, err = self.run_cli('rebind')
        self.assertEqual(1, code, err)
        self.assertNotIn('Traceback', err)
        self.assertIn("rebinding pass failed: KeyError: 'surprise'", err)
        code, out, err = self.run_cli('--debug', 'rebind')
        self.assertIn('Traceback', err)


class TestInterrupted(LiveCliTestCase):

    def test_ctrl_c_is_one_line_without_traceback(self):
        def interrupt(*args, **kwargs):
            raise KeyboardInterrupt
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.observe.render.plan_table', interrupt))
        code, out, err = self.run_cli('status')
        self.assertEqual((130, ''), (code, out))
        self.assertEqual(['nova-pinning: error: interrupted'],
                         err.strip().splitlines())


class TestBoundedCost(testtools.TestCase):
    """Hostile sizes cost bounded memory and time: each runs in a child
    process limited to 1 GiB of address space."""

    def plan(self, text):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'snap.json')
        with open(path, 'w') as f:
            f.write(text)

        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, '-m', 'nova_pinning_hooks.cmd.pinning',
             '--config-file', os.devnull, 'plan', '--snapshot', path],
            capture_output=True, text=True, timeout=120,
            preexec_fn=limit, cwd=TOP)
        return proc, time.monotonic() - start

    def test_huge_counts_and_sets(self):
        cases = [
            with_domain(DOMAIN.replace(VCPU2,
                                       VCPU2.replace('>2<', '>200000000<'))),
            with_domain(DOMAIN.replace(
                '</domain>', '<iothreads>200000000</iothreads></domain>')),
            raw_snap(reserved_cpus=','.join(['0-65535'] * 8000)),
            # 4096 distinct pins of 65,535 CPUs each: 268 million set
            # members unless read only as far as the host's CPUs go.
            with_domain(DOMAIN.replace(VCPU2, "<vcpu>4096</vcpu>").replace(
                '</domain>', '<cputune>%s</cputune><x/></domain>' % ''.join(
                    "<vcpupin vcpu='%d' cpuset='0-65535,^%d'/>" % (v, v)
                    for v in range(4096)))),
            # 3,000 guests, each with its own node set of 65,535 nodes:
            # read only as far as the host's nodes go.
            raw_snap(domains=[{'xml': DOMAIN.replace(
                '<uuid>uh<', '<uuid>u%d<' % k).replace(
                '</domain>', "<numatune><memory mode='strict' "
                "nodeset='0-65535,^%d'/></numatune></domain>" % (k + 1))}
                for k in range(3000)]),
            # 3,000 CPUs, each naming its own 65,535 siblings.
            raw_snap(capabilities=hosts.capabilities(
                [[[c] for c in range(3000)]]).replace(
                "siblings='", "siblings='0-65535,^")),
            # 60,000 NUMA cells (Linux has at most 1024) and 3,000 guests:
            # planning costs nodes x guests.
            raw_snap(capabilities=hosts.capabilities(
                [[[c]] for c in range(60000)]), domains=[
                {'xml': DOMAIN.replace('<uuid>uh<', '<uuid>u%d<' % k)}
                for k in range(3000)]),
        ]
        for text, status in zip(cases, (2, 2, 2, 0, 0, 2, 2)):
            proc, took = self.plan(text)
            self.assertEqual(status, proc.returncode, proc.stderr)
            self.assertEqual(status != 0, proc.stdout == '', proc.stderr)
            self.assertNotIn('MemoryError', proc.stderr)
            self.assertLess(took, 30)  # a safety bound, not a target

    def test_parse_is_linear_in_the_text(self):
        text = ','.join(['0-65535'] * 8000)[:cpuset.MAX_TEXT]
        text = text[:text.rindex(',')]
        start = time.process_time()
        self.assertEqual(65536, len(cpuset.parse(text)))
        self.assertLess(time.process_time() - start, 2)


class TestPinsBeyondTheHost(testtools.TestCase):
    """A guest that arrives (live migration, restore) pinned to CPUs this
    host lacks is re-pinned, not refused."""

    def test_a_pin_to_cpu_100_on_a_small_host_is_rewritten(self):
        from nova_pinning_hooks.engine import plan as plan_mod
        from nova_pinning_hooks.engine import policy
        from nova_pinning_hooks.engine import snapshot
        xml = DOMAIN.replace('</domain>', "<cputune><vcpupin vcpu='0' "
                             "cpuset='100'/><emulatorpin cpuset='100-101'/>"
                             "</cputune></domain>")
        snap_ = snapshot.loads(with_domain(xml, memory_by_node_kib={
            '0': 65536}))
        g = snap_.guests[-1]
        self.assertEqual((None, None), (g.vcpu_pin(0), g.emulator_pin))
        p = policy.make_plan(snap_.host, snap_.guests, snap_.options)
        changed = {(c.kind, c.index) for c in plan_mod.changes(
            p, snap_.guests) if c.uuid == 'uh'}
        self.assertIn(('vcpu', 0), changed)
        self.assertIn(('emulator', None), changed)
