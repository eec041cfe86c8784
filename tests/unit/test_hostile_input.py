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

from nova_pinning_hooks import cpuset
from tests.unit import hosts
from tests.unit.test_cli import CliTestCase
from tests.unit.test_cli import snap
from tests.unit.test_cli_live import LiveCliTestCase

TOP = os.path.join(os.path.dirname(__file__), '..', '..')


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
         'allocation_ratio'),
        ('infinite ratio', raw_snap().replace(
            '"allocation_ratio": 4.0', '"allocation_ratio": 1e999'),
         'allocation_ratio'),
        ('integer with 5000 digits', raw_snap().replace(
            '"allocation_ratio": 4.0', '"allocation_ratio": 1' + '0' * 5000),
         'not valid JSON'),
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
                 ('pass_timeout', '1e999', 'finite')]
        example = os.path.join(TOP, 'etc', 'examples',
                               'intel-2s-28c-ht.snapshot.json')
        for option, value, fragment in cases:
            options = {'allocation_ratio': 4.0, option: value}
            self.write_config(**options)
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

    def test_invalid_utf8_in_a_config_file(self):
        with open(self.config, 'wb') as f:
            f.write(b'[nova_pinning]\nreserved_cpus = \xff\n')
        code, out, err = self.run_cli('status')
        self.assertEqual((2, ''), (code, out), err)
        self.assertEqual(1, len(err.strip().splitlines()), err)


class TestUnexpectedFailure(LiveCliTestCase):

    def test_one_line_and_a_traceback_only_with_debug(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.render.plan_table',
            lambda *a, **k: {}['surprise']))
        code, out, err = self.run_cli('status')
        self.assertEqual((1, ''), (code, out))
        self.assertEqual(["nova-pinning: error: KeyError: 'surprise'"],
                         err.strip().splitlines())
        code, out, err = self.run_cli('--debug', 'status')
        self.assertEqual((1, ''), (code, out))
        self.assertIn('Traceback', err)


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
        ]
        for text, status in zip(cases, (2, 2, 2, 0)):
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
        from nova_pinning_hooks import plan as plan_mod
        from nova_pinning_hooks import policy
        from nova_pinning_hooks import snapshot
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
