"""Prometheus metrics through the nova-pinning command: ``metrics``,
``top --once`` and the exporter. (The exposition:
tests/unit/observe/test_metrics.py; the textfile written after each
pass: tests/unit/runtime/test_metrics.py and
tests/unit/nova/test_metrics.py.)"""

from nova_pinning_hooks.cmd import pinning
from nova_pinning_hooks.observe import endpoint
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from nova_pinning_hooks.observe import settings as observe_settings
from tests.unit.cmd.test_cli_live import LiveCliTestCase
from tests.unit.scrape import value


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


class TestExporter(LiveCliTestCase):

    def free_port(self):
        import socket
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            return s.getsockname()[1]

    def test_serves_fresh_metrics_at_every_scrape(self):
        import threading
        import urllib.request

        conf = pinning.parse_args(['--config-file', self.config, 'metrics'])
        rec = reconciler.Reconciler(settings_mod.read(conf))
        self.addCleanup(rec.close)
        port = self.free_port()
        stop = threading.Event()
        self.addCleanup(stop.set)
        threading.Thread(target=endpoint.serve, daemon=True,
                         args=(rec, observe_settings.read(conf),
                               '127.0.0.1', port, stop)).start()
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
