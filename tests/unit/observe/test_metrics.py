"""Prometheus metrics: the exposition, the textfile written after each
pass in nova-compute (threaded or in a child process), ``metrics`` and
``top --once``."""

import os
import stat

import fixtures
from prometheus_client import parser
import testtools

from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.nova import runtime
from nova_pinning_hooks.observe import endpoint
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.passes import reconciler
from tests.fixtures import FakeLibvirtFixture
from tests.unit import hosts
from tests.unit.nova.test_agent import nova_like_conf
from tests.unit.cmd.test_cli_live import LiveCliTestCase


def samples(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in parser.text_string_to_metric_families(text)
            for s in family.samples}


def value(_text, _metric, **labels):
    found = [v for (n, lb), v in samples(_text).items()
             if n == _metric and all((k, x) in lb for k, x in labels.items())]
    if len(found) != 1:
        raise AssertionError('%d samples %s%r in:\n%s' % (
            len(found), _metric, labels, _text))
    return found[0]


class TestMetricsCommand(LiveCliTestCase):

    def test_series_of_the_host(self):
        a = self.fake.by_name('a')
        a.vcpu_time[1] = 3_500_000_000
        a.vcpu_delay[1] = 250_000_000
        self.assertEqual(0, self.run_cli('rebind')[0])
        bulk = self.fake.calls['getAllDomainStats']  # rebind's: 1
        code, out, err = self.run_cli('metrics')
        self.assertEqual(0, code, err)
        uuid = a.UUIDString()
        self.assertEqual(0.25, value(
            out, 'nova_pinning_vcpu_delay_seconds_total', uuid=uuid,
            name='a', node='0', vcpu='1'))
        self.assertEqual(3.5, value(
            out, 'nova_pinning_vcpu_time_seconds_total', uuid=uuid,
            vcpu='1'))
        self.assertEqual(0.25, value(
            out, 'nova_pinning_guest_steal_seconds_total', uuid=uuid))
        self.assertEqual(2, value(out, 'nova_pinning_guest_vcpus',
                                  name='a', mode='dedicated', node='0'))
        self.assertEqual(2, value(out, 'nova_pinning_guests',
                                  mode='dedicated', node='0'))
        self.assertEqual(4.0, value(
            out, 'nova_pinning_allocation_ratio',
            source='[nova_pinning] allocation_ratio'))
        self.assertEqual(4, value(out, 'nova_pinning_node_pool_cpus',
                                  node='0'))
        self.assertEqual(16, value(
            out, 'nova_pinning_node_allocatable_vcpus', node='0'))
        self.assertEqual(3, value(out, 'nova_pinning_node_vcpus', node='0'))
        self.assertEqual(1, value(out, 'nova_pinning_up'))
        # No pass ran in this command: no pass counters.
        self.assertNotIn('nova_pinning_passes_total', out)
        # One bulk call for the counters of every guest.
        self.assertEqual(1, self.fake.calls['getAllDomainStats'] - bulk)

    def test_build_info_names_the_installed_release(self):
        from importlib import metadata
        code, out, err = self.run_cli('metrics')
        self.assertEqual(0, code, err)
        release = metadata.version('nova-pinning-hooks')
        self.assertEqual(1, value(out, 'nova_pinning_build_info',
                                  version=release))
        # The text Prometheus scrapes: an info series, gauge, value 1.
        self.assertIn('# TYPE nova_pinning_build_info gauge\n', out)
        self.assertIn('nova_pinning_build_info{version="%s"} 1.0\n'
                      % release, out)

    def test_libvirt_down_is_up_0_and_exit_1(self):
        self.fake.down = True
        code, out, err = self.run_cli('metrics')
        self.assertEqual(1, code)
        self.assertEqual(0, value(out, 'nova_pinning_up'))
        # Which release runs is said even when nothing could be read.
        self.assertEqual(1, value(out, 'nova_pinning_build_info'))
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.assertNotIn('Traceback', err)


class TestTopOnce(LiveCliTestCase):

    def test_once_prints_one_frame(self):
        self.fake.by_name('b').vcpu_delay[0] = 0
        code, out, err = self.run_cli('top', '--once', '--interval', '0.5',
                                      '--threshold', '0')
        self.assertEqual(0, code, err)
        self.assertEqual(1, len(self.slept))
        self.assertTrue(out.startswith('nova-pinning top  qemu:///system'),
                        out)
        self.assertIn('\nhost: ratio 4; 3 managed vCPUs of 16 allocatable '
                      'on a pool of 4 pCPUs\n', out)
        self.assertIn('node 0: vCPU demand', out)
        # Threshold 0: every measured guest is marked; not rebound yet.
        self.assertRegex(out, r'\n!  a +dedicated\* +0 +0:0 1:1 ')
        self.assertIn('* = pins not yet as planned', out)

    def test_interval_floor(self):
        code, out, err = self.run_cli('top', '--once', '--interval', '0.001')
        self.assertEqual((2, ''), (code, out))
        self.assertEqual('nova-pinning: error: top: --interval must be at '
                         'least 0.5 s\n', err)
        self.assertEqual([], self.slept)

    def test_bad_arguments_are_2(self):
        for argv in (['--interval', '0'], ['--interval', '-2'],
                     ['--interval', '0.001'], ['--interval', '0.49'],
                     ['--threshold', '101'], ['--threshold', 'nan']):
            self.assertRefused(self.run_cli('top', '--once', *argv), 2,
                               'interval' if '--interval' in argv
                               else 'threshold')


class TestPassStats(testtools.TestCase):

    def result(self, **kw):
        return reconciler.PassResult(**kw)

    def test_counts_by_outcome_kind_and_result(self):
        from nova_pinning_hooks.engine import plan as plan_mod
        c1 = plan_mod.PinChange('u', 'g', 'vcpu', 0, None, frozenset({1}))
        c2 = plan_mod.PinChange('u', 'g', 'emulator', None, None,
                                frozenset({1}))
        stats = passstats.PassStats()
        stats.record(self.result(changes=[c1, c2], applied=[c1],
                                 skipped=[(c2, 'busy')],
                                 calls={'read': 4, 'write': 2},
                                 seconds=0.5, error='libvirt: x',
                                 error_kind='failed'), now=1000.0)
        stats.record(self.result(calls={'read': 3}, seconds=0.25))
        stats.record(self.result(error='no ratio', error_kind='input'))
        text = metrics.exposition(metrics.HostView(), stats)
        self.assertEqual(1, value(text, 'nova_pinning_passes_total',
                                  outcome='ok'))
        self.assertEqual(1, value(text, 'nova_pinning_passes_total',
                                  outcome='failed'))
        self.assertEqual(1, value(text, 'nova_pinning_passes_total',
                                  outcome='refused'))
        self.assertEqual(0.75, value(
            text, 'nova_pinning_pass_duration_seconds_sum'))
        self.assertEqual(3, value(
            text, 'nova_pinning_pass_duration_seconds_count'))
        self.assertEqual(1, value(text, 'nova_pinning_pin_changes_total',
                                  result='applied', kind='vcpu'))
        self.assertEqual(1, value(text, 'nova_pinning_pin_changes_total',
                                  result='skipped', kind='emulator'))
        self.assertEqual(7, value(text, 'nova_pinning_libvirt_calls_total',
                                  kind='read'))
        self.assertEqual(0, value(text, 'nova_pinning_last_pass_success'))
        self.assertEqual(0, value(text, 'nova_pinning_vcpu_polls_total'))

    def test_vcpu_count_polls_are_counted_with_their_calls(self):
        stats = passstats.PassStats()
        stats.record(self.result(calls={'read': 3, 'write': 1}))
        stats.record_poll({'read': 5, 'write': 0})
        stats.record_poll({'read': 2})
        text = metrics.exposition(metrics.HostView(), stats)
        self.assertEqual(2, value(text, 'nova_pinning_vcpu_polls_total'))
        self.assertEqual(10, value(text, 'nova_pinning_libvirt_calls_total',
                                   kind='read'))
        self.assertEqual(1, value(text, 'nova_pinning_libvirt_calls_total',
                                  kind='write'))
        self.assertEqual(1, value(text, 'nova_pinning_passes_total',
                                  outcome='ok'))

    def test_last_pass_success_means_every_change_written(self):
        from nova_pinning_hooks.engine import plan as plan_mod
        c = plan_mod.PinChange('u', 'g', 'vcpu', 0, None, frozenset({1}))
        stats = passstats.PassStats()
        stats.record(self.result(changes=[c], skipped=[(c, 'busy')]))
        text = metrics.exposition(metrics.HostView(), stats)
        self.assertEqual(1, value(text, 'nova_pinning_passes_total',
                                  outcome='ok'))
        self.assertEqual(0, value(text, 'nova_pinning_last_pass_success'))
        stats.record(self.result(changes=[c], applied=[c]))
        text = metrics.exposition(metrics.HostView(), stats)
        self.assertEqual(1, value(text, 'nova_pinning_last_pass_success'))


class OneGuestCase(testtools.TestCase):
    """One 2-vCPU guest on the fake small host; a textfile path."""

    def setUp(self):
        super().setUp()
        self.addCleanup(activation.deactivate)
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        self.fake.add_domain('g', 2, xml=hosts.domain_xml('g', 2))
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'nova_pinning.prom')


class TestTextfileInNovaCompute(OneGuestCase):

    def run_passes(self, conf, n):
        a = runtime.Runtime(conf, out_of_process=False)
        self.addCleanup(a.stop)
        a.ratio_file.write()
        for i in range(n):
            self.assertTrue(a.coalescer.request('t%d' % i, wait=True,
                                                timeout=30))
        return a

    def test_written_after_each_pass(self):
        conf = nova_like_conf(self, metrics_textfile=self.path)
        os.umask(0o077)  # the mode is explicit, whatever the umask
        self.addCleanup(os.umask, 0o022)
        a = self.run_passes(conf, 2)
        self.assertIsNone(a.last_result.error)
        with open(self.path) as f:
            text = f.read()
        self.assertEqual(0o644, stat.S_IMODE(os.stat(self.path).st_mode))
        self.assertEqual(2, value(text, 'nova_pinning_passes_total',
                                  outcome='ok'))
        self.assertEqual(1, value(text, 'nova_pinning_guests',
                                  mode='dedicated', node='0'))
        self.assertEqual(2, len([k for k in samples(text) if k[0] ==
                                 'nova_pinning_vcpu_delay_seconds_total']))
        self.assertEqual(1, value(text, 'nova_pinning_up'))
        self.assertEqual([], [n for n in os.listdir(self.dir)
                              if n.endswith('.tmp')])

    def test_failure_is_a_warning_never_a_failed_pass(self):
        missing = os.path.join(self.dir, 'no-such-dir', 'x.prom')
        conf = nova_like_conf(self, metrics_textfile=missing)
        logs = self.useFixture(fixtures.FakeLogger())
        a = self.run_passes(conf, 1)
        self.assertIsNone(a.last_result.error)
        self.assertIn('metrics not written', logs.output)
        self.assertFalse(os.path.exists(missing))

    def test_off_by_default(self):
        conf = nova_like_conf(self)
        a = self.run_passes(conf, 1)
        self.assertEqual(1, a.pass_metrics.stats.passes['ok'])
        self.assertEqual([], os.listdir(self.dir))


class TestTextfileInTheAgent(testtools.TestCase):
    """``nova-pinning agent`` (``service.BindingService``), which is also
    nova-compute's worker process under eventlet, writes it too."""

    def test_written_after_each_pass_with_counts_of_the_process(self):
        from nova_pinning_hooks.runtime import service
        fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        fake.add_domain('g', 2, xml=hosts.domain_xml('g', 2))
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova_pinning.prom')
        conf = nova_like_conf(self, metrics_textfile=path,
                              allocation_ratio=4.0)
        svc = service.BindingService(conf, events=False)
        self.addCleanup(svc.stop)
        svc.start()
        for i in range(3):
            self.assertTrue(svc.coalescer.request('t%d' % i, wait=True,
                                                  timeout=30))
        with open(path) as f:
            text = f.read()
        self.assertEqual(svc.coalescer.passes, value(
            text, 'nova_pinning_passes_total', outcome='ok'))
        self.assertGreaterEqual(svc.coalescer.passes, 3)
        # g's two vCPUs, written by the first pass only.
        self.assertEqual(2, value(text, 'nova_pinning_pin_changes_total',
                                  result='applied', kind='vcpu'))
        self.assertEqual(1, value(text, 'nova_pinning_guests',
                                  mode='dedicated', node='0'))


class TestExporter(LiveCliTestCase):

    def free_port(self):
        import socket
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            return s.getsockname()[1]

    def test_serves_fresh_metrics_at_every_scrape(self):
        import threading
        import urllib.request

        from nova_pinning_hooks.cmd import pinning
        conf = pinning.parse_args(['--config-file', self.config, 'metrics'])
        rec = reconciler.Reconciler(conf)
        self.addCleanup(rec.close)
        port = self.free_port()
        stop = threading.Event()
        self.addCleanup(stop.set)
        threading.Thread(target=endpoint.serve, daemon=True,
                         args=(rec, conf, '127.0.0.1', port, stop)).start()
        a = self.fake.by_name('a')
        url = 'http://127.0.0.1:%d/metrics' % port
        texts = []
        for delay_ns in (1_000_000_000, 3_000_000_000):
            a.vcpu_delay[0] = delay_ns
            for _ in range(50):
                try:
                    with urllib.request.urlopen(url, timeout=5) as r:
                        texts.append(r.read().decode())
                    break
                except OSError:
                    import time
                    time.sleep(0.05)  # the server is starting
        self.assertEqual([1.0, 3.0], [value(
            t, 'nova_pinning_vcpu_delay_seconds_total', name='a',
            vcpu='0') for t in texts])
        self.assertEqual(2, self.fake.calls['getAllDomainStats'])

    def test_bad_listen_is_2(self):
        for bad in ('9179', 'localhost:9179', '127.0.0.1:0',
                    '127.0.0.1:65536', '[::1]9179', '300.1.1.1:80',
                    '127.0.0.1:-1', '[zz::1]:80'):
            self.assertRefused(self.run_cli('exporter', '--listen', bad), 2,
                               '--listen')

    def test_address_in_use_is_1(self):
        import socket
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            s.listen()
            port = s.getsockname()[1]
            self.assertRefused(self.run_cli(
                'exporter', '--listen', '127.0.0.1:%d' % port), 1,
                'cannot listen on 127.0.0.1 port %d' % port)


class TestTheOvercommitFileOpenedOnce(OneGuestCase):
    """A scrape, and a pass with its textfile, open the overcommit file
    once: the settings read then serve the plan, the ratio's source, the
    isolation state (nova's CPU sets) and the file's times. Counted where
    the file is opened: every read of it goes through
    ``statefile.read_json`` with its path."""

    def setUp(self):
        super().setUp()
        # reserved_cpus set: the isolation state checks it against
        # nova's CPU sets, which are in the file.
        self.conf = nova_like_conf(self, reserved_cpus='0',
                                   metrics_textfile=self.path)
        self.runtime = runtime.Runtime(self.conf, out_of_process=False)
        self.addCleanup(self.runtime.stop)
        self.assertTrue(self.runtime.ratio_file.write())
        path = self.conf.nova_pinning.overcommit_file
        read_json = statefile.read_json
        self.opened = []

        def counting(p, *args, **kwargs):
            if p == path:
                self.opened.append(p)
            return read_json(p, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.statefile.read_json', counting))

    def test_a_scrape(self):
        rec = reconciler.Reconciler(self.conf)
        self.addCleanup(rec.close)
        view = metrics.read_view(rec, self.conf)
        self.assertEqual([], view.errors)
        self.assertIn('state', view.isolation)
        self.assertGreater(view.overcommit['written'], 0)
        self.assertEqual(1, len(self.opened))
        del self.opened[:]
        text = metrics.LiveCollector(rec, self.conf).render().decode()
        self.assertEqual(1, value(text, 'nova_pinning_up'))
        self.assertEqual(1, len(self.opened))

    def test_a_pass_and_its_textfile(self):
        self.assertTrue(self.runtime.coalescer.request('t', wait=True,
                                                       timeout=30))
        self.assertIsNone(self.runtime.last_result.error)
        self.assertTrue(os.path.exists(
            self.conf.nova_pinning.metrics_textfile))
        self.assertEqual(1, len(self.opened))
