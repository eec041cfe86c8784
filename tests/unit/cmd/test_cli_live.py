"""Exit status and output of the live commands (fake libvirt), and files
that are not what they claim to be (FIFOs, devices, huge files)."""

import io
import json
import os

import fixtures
import testtools

from nova_pinning_hooks.cmd import common
from nova_pinning_hooks.cmd import pinning
from tests.fixtures import FakeLibvirtFixture
from tests.unit import hosts
from tests.unit.host.test_safefs import Alarm


class LiveCliTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        self.fake.add_domain('a', 2, xml=hosts.domain_xml('a', 2),
                             memory_by_node_kib={'0': 65536})
        self.fake.add_domain('b', 1, xml=hosts.domain_xml('b', 1),
                             memory_by_node_kib={'0': 65536})
        self.config = os.path.join(self.tmp, 'nph.conf')
        self.write_config(allocation_ratio=4.0, busy_retries=0,
                          busy_retry_delay=0)
        self.useFixture(Alarm(30))
        # status samples vCPU counters over --interval: no real wait.
        self.slept = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.cmd.live._sleep', self.slept.append))

    def write_config(self, **options):
        options.setdefault('lock_path', self.tmp)
        # Counts and pins as with emulator and I/O threads on the vCPUs;
        # test_emuthreads.py runs these commands with ``shared``.
        options.setdefault('emulator_threads', 'guest')
        with open(self.config, 'w') as f:
            f.write('[nova_pinning]\n')
            for key, value in sorted(options.items()):
                f.write('%s = %s\n' % (key, value))

    def run_cli(self, *argv, config=None):
        out, err = io.StringIO(), io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        code = pinning.main(['--config-file', config or self.config] +
                            list(argv))
        return code, out.getvalue(), err.getvalue()

    def assertRefused(self, result, status, fragment):
        code, out, err = result
        self.assertEqual((status, ''), (code, out), err)
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.assertIn(fragment, err)
        self.assertNotIn('Traceback', err)


class TestExitStatus(LiveCliTestCase):

    def test_all_applied_is_0(self):
        code, out, err = self.run_cli('rebind')
        self.assertEqual(0, code, err)
        self.assertIn('5 changes, 5 applied, 0 skipped', out)

    def test_skipped_changes_are_1_and_listed_once(self):
        self.fake.busy['b'] = 5
        code, out, err = self.run_cli('rebind')
        self.assertEqual(1, code)
        skipped = [x for x in out.splitlines() if x.startswith('skipped')]
        # b's vCPU and emulator pins: each once, with its reason.
        self.assertEqual(['skipped   b vcpu 0: unpinned -> 2 (guest busy in '
                          'another job)',
                          'skipped   b emulator: unpinned -> 2 (guest busy '
                          'in another job)'], skipped)
        self.assertIn('5 changes, 3 applied, 2 skipped', out)
        self.assertEqual(['nova-pinning: error: 2 change(s) skipped'],
                         err.strip().splitlines()[-1:])

    def test_libvirt_unreachable_is_1_not_2(self):
        self.fake.down = True
        for command in ('rebind', 'status', 'snapshot'):
            self.assertRefused(self.run_cli(command), 1, 'libvirt')

    def test_bad_settings_are_2(self):
        self.write_config(overcommit_file=os.path.join(self.tmp, 'none'))
        for command in ('rebind', 'status'):
            self.assertRefused(self.run_cli(command), 2, 'does not exist')


class TestFilesThatAreNotFiles(LiveCliTestCase):

    def test_overcommit_file_fifo_device_link_huge(self):
        fifo = os.path.join(self.tmp, 'fifo')
        os.mkfifo(fifo)
        huge = os.path.join(self.tmp, 'huge')
        with open(huge, 'wb') as f:
            f.truncate(2 << 20)
        link = os.path.join(self.tmp, 'link')
        os.symlink(huge, link)
        for path, why in ((fifo, 'not a regular file'),
                          ('/dev/zero', 'not a regular file'),
                          (huge, 'larger than'),
                          (link, 'symbolic link')):
            self.write_config(overcommit_file=path)
            for command in ('rebind', 'status'):
                self.assertRefused(self.run_cli(command), 2, why)
        self.assertEqual(0, self.fake.writes())

    def test_snapshot_fifo_device_huge(self):
        fifo = os.path.join(self.tmp, 'fifo')
        os.mkfifo(fifo)
        huge = os.path.join(self.tmp, 'huge.json')
        with open(huge, 'wb') as f:
            f.truncate(common.SNAPSHOT_LIMIT + 1)
        for path, why in ((fifo, 'not a regular file'),
                          ('/dev/zero', 'not a regular file'),
                          (huge, 'larger than')):
            self.assertRefused(self.run_cli('plan', '--snapshot', path), 2,
                               why)

    def test_config_file_fifo_device_huge(self):
        fifo = os.path.join(self.tmp, 'fifo.conf')
        os.mkfifo(fifo)
        huge = os.path.join(self.tmp, 'huge.conf')
        with open(huge, 'wb') as f:
            f.truncate(common.CONFIG_LIMIT + 1)
        confdir = os.path.join(self.tmp, 'conf.d')
        os.mkdir(confdir)
        os.mkfifo(os.path.join(confdir, 'x.conf'))
        for argv, why in ((['--config-file', fifo], 'not a regular file'),
                          (['--config-file=/dev/zero'],
                           'not a regular file'),
                          (['--config-file', huge], 'larger than'),
                          (['--config-dir', confdir], 'not a regular')):
            code, out, err = self.run_cli(*(argv + ['status']))
            self.assertRefused((code, out, err), 2, why)


class TestStatusDrift(LiveCliTestCase):

    def test_status_shows_where_the_kernel_runs_a_vcpu(self):
        self.assertEqual(0, self.run_cli('rebind')[0])
        a = self.fake.by_name('a')
        pin = a.vcpu_pins[0]
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.virtread.Reader._affinity',
            lambda _self, name: {'0': '0-3'} if name == 'a' else {}))
        code, out, err = self.run_cli('status', '--format', 'json')
        self.assertEqual(0, code, err)
        guest = {g['name']: g for g in json.loads(out)['guests']}['a']
        self.assertEqual({'0': {'libvirt': ','.join(map(str, pin)),
                                'kernel': '0-3'}}, guest['kernel_drift'])
        self.assertFalse(guest['live_matches_plan'])
        code, out, err = self.run_cli('status')
        self.assertIn('kernel drift: a vCPU 0 runs on 0-3', out)


class TestStatusSummary(LiveCliTestCase):

    def test_status_shows_what_the_host_reports_to_the_scheduler(self):
        code, out, err = self.run_cli('status', '--interval', '0')
        self.assertEqual(0, code, err)
        self.assertIn('scheduler summary (compute node stats '
                      'nova_pinning_numa, ', out)
        self.assertIn('3 of 3 vCPUs one-to-one, 0 cross-node, ratio 4',
                      out)
        self.assertIn('  node 0: pool 4 pCPUs, 3 vCPUs homed (dedicated)',
                      out)
        self.assertIn('  reported as: {"t":', out)
        self.assertIn(',"v":1,', out)
        code, out, err = self.run_cli('status', '--interval', '0',
                                      '--format', 'json')
        data = json.loads(out)['scheduler_summary']
        self.assertEqual(('nova_pinning_numa', 3),
                         (data['key'], data['one_to_one_vcpus']))
        # 32 GiB node, two guests of 1 GiB (their <memory>).
        self.assertEqual([[0, 4, 3, 32 * 1048576, 2 * 1048576, 0]],
                         json.loads(data['value'])['n'])


class TestSnapshotCommand(LiveCliTestCase):

    def test_the_live_snapshot_is_written_in_the_snapshot_format(self):
        # The JSON ``nova-pinning snapshot`` writes (LiveSnapshot.to_json)
        # keeps its keys and order, and ``plan --snapshot`` plans it.
        self.write_config(allocation_ratio=4.0, reserved_cpus='0',
                          busy_retries=0, busy_retry_delay=0)
        code, out, err = self.run_cli('snapshot')
        self.assertEqual(0, code, err)
        data = json.loads(out)
        self.assertEqual(['version', 'capabilities', 'domains',
                          'allocation_ratio', 'ratio_source',
                          'reserved_cpus', 'shared_cpus', 'dedicated_cpus'],
                         list(data))
        self.assertEqual((1, 4.0, '[nova_pinning] allocation_ratio', '0',
                          None, None),
                         (data['version'], data['allocation_ratio'],
                          data['ratio_source'], data['reserved_cpus'],
                          data['shared_cpus'], data['dedicated_cpus']))
        self.assertEqual(2, len(data['domains']))
        self.assertEqual({'0': 65536},
                         data['domains'][0]['memory_by_node_kib'])
        path = os.path.join(self.tmp, 'snap.json')
        with open(path, 'w') as f:
            f.write(out)
        code, planned, err = self.run_cli('plan', '--snapshot', path)
        self.assertEqual(0, code, err)
        for name in ('a', 'b'):
            self.assertIn(name, planned)


class TestStatusRatio(LiveCliTestCase):

    def test_status_says_where_the_ratio_comes_from(self):
        from nova_pinning_hooks.engine import hostsettings
        from nova_pinning_hooks.host import overcommitfile
        path = os.path.join(self.tmp, 'nova', 'oc.json')
        overcommitfile.write(path, hostsettings.HostSettings(
            16.0, ratio_source='placement'))
        self.write_config(overcommit_file=path)
        code, out, err = self.run_cli('status')
        self.assertEqual(0, code, err)
        self.assertIn('allocation ratio 16, from placement', out)
        code, out, err = self.run_cli('status', '--format', 'json')
        self.assertEqual('placement',
                         json.loads(out)['allocation_ratio_source'])
        self.write_config(allocation_ratio=3.0)
        code, out, err = self.run_cli('status')
        self.assertIn('allocation ratio 3, from [nova_pinning] '
                      'allocation_ratio', out)


    def test_status_says_the_overcommit_file_is_stale(self):
        # nova-compute could not rewrite it and set it aside (issue 34
        # R4): status says so, in one line, and plans nothing.
        from nova_pinning_hooks.engine import hostsettings
        from nova_pinning_hooks.host import overcommitfile
        path = os.path.join(self.tmp, 'nova', 'oc.json')
        overcommitfile.write(path, hostsettings.HostSettings(
            16.0, ratio_source='placement'))
        self.assertTrue(overcommitfile.set_aside(path))
        self.write_config(overcommit_file=path)
        code, out, err = self.run_cli('status')
        self.assertEqual((2, ''), (code, out))
        self.assertIn('overcommit file %s is stale' % path, err)
        self.assertEqual(1, len(err.splitlines()))


class TestStatusSteal(LiveCliTestCase):
    """``status`` samples vCPU counters twice, ``--interval`` apart."""

    def setUp(self):
        super().setUp()
        self.clock = [100.0]
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.libvirtapi.now', lambda: self.clock[0]))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.cmd.live._sleep', self.advance))

    def advance(self, seconds):
        """The guests run while the command waits: a's vCPU 0 waits
        half the time, b runs without waiting."""
        self.slept.append(seconds)
        self.clock[0] += seconds
        ns = int(seconds * 1e9)
        a, b = self.fake.by_name('a'), self.fake.by_name('b')
        a.vcpu_time[0] += ns // 2
        a.vcpu_delay[0] += ns // 2
        b.vcpu_time[0] += ns

    def test_table_marks_the_guest_over_the_threshold(self):
        self.write_config(allocation_ratio=4.0, steal_warning_percent=20)
        code, out, err = self.run_cli('status', '--interval', '3')
        self.assertEqual(0, code, err)
        # The wait is what is left of the interval after the reads.
        self.assertEqual(1, len(self.slept))
        self.assertTrue(2.5 < self.slept[0] <= 3.0, self.slept)
        self.assertIn('steal over %.2f s' % self.slept[0], out)
        steal_part = out[out.index('steal over'):]
        guest_lines = [ln for ln in steal_part.splitlines()
                       if ln.lstrip('! ').startswith(('a ', 'b '))]
        # Worst first; a: vCPU 0 waits half, vCPU 1 idle -> 25 % steal.
        self.assertEqual(2, len(guest_lines), steal_part)
        self.assertTrue(guest_lines[0].startswith('!  a '), guest_lines)
        self.assertIn('25.0', guest_lines[0])
        self.assertIn('50.0', guest_lines[0])  # worst vCPU
        self.assertTrue(guest_lines[1].startswith('   b '), guest_lines)
        self.assertIn('100.0', guest_lines[1])  # b's CPU use
        self.assertIn('node 0: vCPU demand 2.00 CPUs, pool 4 CPUs, '
                      '2 guest(s), worst a 25.0 % steal', steal_part)
        # One bulk call per sample, counted with the other reads.
        self.assertEqual(2, self.fake.calls['getAllDomainStats'])

    def test_json(self):
        code, out, err = self.run_cli('status', '--format', 'json',
                                      '--interval', '1.5')
        self.assertEqual(0, code, err)
        data = json.loads(out)['steal']
        self.assertEqual(round(self.slept[0], 6), data['interval_seconds'])

        def rounded(value):
            if isinstance(value, dict):
                return {k: rounded(v) for k, v in value.items()}
            if isinstance(value, list):
                return [rounded(v) for v in value]
            return round(value, 3) if isinstance(value, float) else value
        by_name = {g['name']: rounded(g) for g in data['guests'].values()}
        self.assertEqual(25.0, by_name['a']['steal_pct'])
        self.assertEqual({'0': {'steal_pct': 50.0, 'cpu_pct': 50.0},
                          '1': {'steal_pct': 0.0, 'cpu_pct': 0.0}},
                         by_name['a']['vcpus'])
        self.assertEqual(100.0, by_name['b']['cpu_pct'])
        self.assertEqual([{'node': 0, 'guests': 2, 'demand_cpus': 2.0,
                           'pool_cpus': 4, 'worst_guest': 'a',
                           'worst_steal_pct': 25.0}],
                         rounded(data['nodes']))
        self.assertEqual(10.0, data['warning_percent'])

    def test_interval_0_takes_no_sample(self):
        code, out, err = self.run_cli('status', '--interval', '0')
        self.assertEqual(0, code, err)
        self.assertNotIn('steal over', out)
        self.assertEqual(0, self.fake.calls['getAllDomainStats'])
        code, out, err = self.run_cli('status', '--interval', '0',
                                      '--format', 'json')
        self.assertNotIn('steal', json.loads(out))

    def test_bad_interval_is_2(self):
        for bad in ('-1', 'nan', 'inf', '1e9', '3601', '', '٣', '0x10',
                    '1,5'):
            self.assertRefused(self.run_cli('status', '--interval', bad), 2,
                               '--interval')
        self.assertEqual(0, self.fake.calls['getAllDomainStats'])
