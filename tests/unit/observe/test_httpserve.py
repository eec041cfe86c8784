"""The metrics endpoint over HTTP (``httpserve``), as the exporter, the
agent (``--listen``) and nova-compute's pass thread
(``[nova_pinning] metrics_listen``) serve it: bounded threads, a total
read deadline, 404 and HEAD, and what is served from the start."""

import os
import socket
import threading
import time
import urllib.error
import urllib.request

import fixtures
import testtools

from nova_pinning_hooks.cmd import pinning
from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.nova import runtime
from nova_pinning_hooks.observe import endpoint as endpoint_mod
from nova_pinning_hooks.observe import httpserve
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings
from tests.fixtures import FakeLibvirtFixture
from tests.unit import hosts
from tests.unit.nova.test_agent import nova_like_conf
from tests.unit.cmd.test_cli_live import LiveCliTestCase
from tests.unit.observe.test_metrics import samples
from tests.unit.observe.test_metrics import value

MAX_REQUESTS = 4
READ_TIMEOUT = 1.0


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def get(url, method='GET', timeout=10):
    """(status, headers, body) of one request."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True



def overcommit_times(conf):
    """The file's times as a scrape sees them (settings read once)."""
    try:
        read = settings.load(conf)
    except settings.SettingsError:
        read = None
    return metrics.overcommit_times(conf, read)

class TestExporterEndpoint(LiveCliTestCase):
    """Through ``endpoint.serve``, what ``nova-pinning exporter`` runs."""

    def setUp(self):
        super().setUp()
        self.write_config(allocation_ratio=4.0, busy_retries=0,
                          busy_retry_delay=0,
                          metrics_max_requests=MAX_REQUESTS,
                          metrics_read_timeout=READ_TIMEOUT)
        conf = pinning.parse_args(['--config-file', self.config, 'metrics'])
        rec = reconciler.Reconciler(conf)
        self.addCleanup(rec.close)
        self.port = free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        stop = threading.Event()
        self.addCleanup(stop.set)
        self.baseline = threading.active_count()
        threading.Thread(target=endpoint_mod.serve, daemon=True,
                         args=(rec, conf, '127.0.0.1', self.port,
                               stop)).start()
        self.assertTrue(wait_until(self.answers), 'the server never answered')
        time.sleep(0.3)  # the thread of that request has ended
        self.idle = threading.active_count()  # the server's own threads

    def answers(self):
        try:
            return get(self.url + '/metrics', timeout=2)[0] == 200
        except OSError:
            return False

    def half_open(self, n):
        """``n`` connections that never send a request."""
        socks = []
        for _ in range(n):
            s = socket.create_connection(('127.0.0.1', self.port), 5)
            self.addCleanup(s.close)
            socks.append(s)
        return socks

    def test_half_open_connections_keep_the_threads_bounded(self):
        socks = self.half_open(60)
        time.sleep(0.5)  # every connection accepted by now
        peak = threading.active_count()
        # One thread per request being read, at most MAX_REQUESTS; the
        # others were answered 503 and closed by the accepting thread.
        self.assertLessEqual(peak - self.idle, MAX_REQUESTS,
                             'threads grew with half-open connections')
        status = get(self.url + '/metrics')[0]
        self.assertIn(status, (200, 503))
        for s in socks:
            s.close()
        # Freed within the read deadline: scrapes are served again.
        self.assertTrue(wait_until(self.answers, READ_TIMEOUT * 10))

    def test_a_silent_client_is_cut_off_at_the_read_timeout(self):
        s = socket.create_connection(('127.0.0.1', self.port), 5)
        self.addCleanup(s.close)
        s.settimeout(READ_TIMEOUT * 10)
        started = time.monotonic()
        try:
            data = s.recv(100)
        except socket.timeout:
            self.fail('the server kept a silent connection open')
        self.assertEqual(b'', data)
        self.assertLess(time.monotonic() - started, READ_TIMEOUT * 10)

    def test_the_deadline_is_total_not_per_read(self):
        """A byte every 0.3 s (a slow loris) is cut off too."""
        s = socket.create_connection(('127.0.0.1', self.port), 5)
        self.addCleanup(s.close)
        cut = False
        deadline = time.monotonic() + READ_TIMEOUT * 8
        for byte in b'GET /metrics HTTP/1.1\r\nX-Slow: ' + b'a' * 100:
            try:
                s.send(bytes([byte]))
            except OSError:
                cut = True
                break
            time.sleep(0.3)
            if time.monotonic() > deadline:
                break
        if not cut:
            s.settimeout(READ_TIMEOUT * 2)
            try:
                cut = s.recv(100) == b''
            except (socket.timeout, OSError) as exc:
                cut = not isinstance(exc, socket.timeout)
        self.assertTrue(cut, 'a client sending a byte at a time was kept')

    def test_paths_methods_and_head(self):
        status, headers, body = get(self.url + '/metrics')
        self.assertEqual(200, status)
        self.assertIn('text/plain', headers['Content-Type'])
        self.assertIn(b'nova_pinning_up 1.0', body)
        self.assertEqual(200, get(self.url + '/')[0])
        self.assertEqual(200, get(self.url + '/metrics?x=1')[0])
        for path in ('/favicon.ico', '/metricsx', '/metrics/', '/x/../'):
            self.assertEqual(404, get(self.url + path)[0], path)
        status, headers, body = get(self.url + '/metrics', method='HEAD')
        self.assertEqual((200, b''), (status, body))
        self.assertGreater(int(headers['Content-Length']), 100)
        self.assertEqual(404, get(self.url + '/nope', method='HEAD')[0])
        for method in ('POST', 'PUT', 'DELETE', 'OPTIONS'):
            self.assertEqual(405, get(self.url + '/metrics',
                                      method=method)[0], method)

    def test_garbage_is_400_and_the_server_lives_on(self):
        for junk in (b'\x00\xff\r\n\r\n', b'GET\r\n\r\n',
                     b'GET /metrics FTP/1\r\n\r\n', b'x' * 9000):
            with socket.create_connection(('127.0.0.1', self.port), 5) as s:
                s.sendall(junk)
                s.settimeout(READ_TIMEOUT * 5)
                try:
                    reply = s.recv(100)
                except OSError:
                    reply = b''
            self.assertTrue(reply == b'' or reply.startswith(b'HTTP/1.1 400'),
                            (junk[:20], reply))
        self.assertTrue(self.answers())


class TestAnswer(testtools.TestCase):

    def test_render_failure_is_500_not_an_exception(self):
        def broken():
            raise RuntimeError('libvirt fell over')
        reply = httpserve.answer(b'GET /metrics HTTP/1.1\r\n\r\n', broken)
        self.assertTrue(reply.startswith(b'HTTP/1.1 500'), reply)
        self.assertIn(b'RuntimeError', reply)

    def test_parse_listen(self):
        self.assertEqual(('::1', 9179), httpserve.parse_listen('[::1]:9179'))
        for bad in ('', 'x:1', '1.2.3.4:0', '[::1]:70000', '1.2.3:4'):
            self.assertRaises(ValueError, httpserve.parse_listen, bad)


class TestAgentEndpoint(testtools.TestCase):
    """One scrape target: the process that runs the passes serves its
    pass counters with the host's series."""

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        self.fake.add_domain('g', 2, xml=hosts.domain_xml('g', 2))

    def scrape(self, address):
        status, _, body = get('http://%s:%d/metrics' % address)
        self.assertEqual(200, status)
        return body.decode()

    def test_binding_service_serves_passes_and_guests(self):
        from nova_pinning_hooks.runtime import service
        conf = nova_like_conf(self, allocation_ratio=4.0)
        svc = service.BindingService(conf, events=False)
        self.addCleanup(svc.stop)
        endpoint = svc.pass_metrics.start_endpoint(('127.0.0.1', 0))
        before = self.scrape(endpoint.address)
        # Before any pass: the counters are there, at zero.
        self.assertEqual(0, value(before, 'nova_pinning_passes_total',
                                  outcome='ok'))
        self.assertEqual(0, value(before,
                                  'nova_pinning_last_pass_timestamp_seconds'))
        svc.start()
        for i in range(2):
            self.assertTrue(svc.coalescer.request('t%d' % i, wait=True,
                                                  timeout=30))
        text = self.scrape(endpoint.address)
        self.assertEqual(svc.coalescer.passes, value(
            text, 'nova_pinning_passes_total', outcome='ok'))
        self.assertEqual(2, value(text, 'nova_pinning_pin_changes_total',
                                  result='applied', kind='vcpu'))
        self.assertEqual(2, len([k for k in samples(text) if k[0] ==
                                 'nova_pinning_vcpu_delay_seconds_total']))
        self.assertEqual(1, value(text, 'nova_pinning_guests',
                                  mode='dedicated', node='0'))
        self.assertGreater(value(
            text, 'nova_pinning_last_pass_timestamp_seconds'), 1e9)
        # After a pass, a scrape reads the vCPU counters (one bulk call)
        # and plans nothing: the plan is the last pass's.
        before = dict(self.fake.calls)
        self.scrape(endpoint.address)
        made = {m: n - before.get(m, 0) for m, n in self.fake.calls.items()
                if n != before.get(m, 0)}
        self.assertEqual({'getAllDomainStats': 1}, made)
        svc.stop()
        self.assertRaises(OSError, get, 'http://%s:%d/metrics'
                          % endpoint.address, timeout=2)

    def test_nova_compute_pass_thread_serves_on_metrics_listen(self):
        self.addCleanup(activation.deactivate)
        port = free_port()
        conf = nova_like_conf(self, metrics_listen='127.0.0.1:%d' % port,
                              allocation_ratio=4.0)
        a = runtime.Runtime(conf, out_of_process=False)
        self.addCleanup(a.stop)
        a.start()
        self.assertTrue(a.coalescer.request('t', wait=True, timeout=30))
        text = self.scrape(('127.0.0.1', port))
        self.assertGreaterEqual(value(text, 'nova_pinning_passes_total',
                                      outcome='ok'), 1)
        self.assertEqual(1, value(text, 'nova_pinning_guests',
                                  mode='dedicated', node='0'))

    def test_nova_compute_port_taken_is_an_error_in_the_log(self):
        self.addCleanup(activation.deactivate)
        logs = self.useFixture(fixtures.FakeLogger())
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            s.listen()
            conf = nova_like_conf(self, metrics_listen='127.0.0.1:%d'
                                  % s.getsockname()[1], allocation_ratio=4.0)
            a = runtime.Runtime(conf, out_of_process=False)
            self.addCleanup(a.stop)
            a.start()  # no exception into nova-compute
            self.assertTrue(a.coalescer.request('t', wait=True, timeout=30))
        self.assertIn('metrics not served', logs.output)
        self.assertIsNone(a.last_result.error)


class TestServedFromTheStart(testtools.TestCase):
    """What a panel or an alert reads exists on a quiet host: zero, not
    absent ("No data")."""

    def test_counters_and_gauges_at_zero(self):
        text = metrics.exposition(metrics.HostView(isolation={
            'state': 'not configured'}), passstats.PassStats())
        for result in ('applied', 'skipped'):
            for kind in ('vcpu', 'emulator', 'iothread', 'numa'):
                self.assertEqual(0, value(
                    text, 'nova_pinning_pin_changes_total', result=result,
                    kind=kind))
        self.assertEqual(0, value(
            text, 'nova_pinning_isolation_not_confined_processes'))
        self.assertEqual(0, value(text, 'nova_pinning_isolation_applied',
                                  mode='none'))
        self.assertEqual(0, value(
            text, 'nova_pinning_last_pass_timestamp_seconds'))
        self.assertEqual(0, value(
            text, 'nova_pinning_pass_duration_seconds_count'))

    def test_systemd_counts_units(self):
        text = metrics.exposition(metrics.HostView(isolation={
            'state': 'applied', 'mode': 'systemd',
            'not_confined': ['a.service']}))
        self.assertEqual(1, value(
            text, 'nova_pinning_isolation_not_confined_units'))

    def test_overcommit_file_timestamp(self):
        conf = nova_like_conf(self)
        path = conf.nova_pinning.overcommit_file
        times = overcommit_times(conf)
        self.assertEqual(0.0, times['written'])  # missing
        boot = times['boot']
        self.assertLess(boot, time.time())
        a = runtime.Runtime(conf, out_of_process=False)
        self.addCleanup(a.stop)
        self.assertTrue(a.ratio_file.write(2.0))
        written = overcommit_times(conf)['written']
        self.assertLess(abs(time.time() - written), 5)
        text = metrics.exposition(metrics.HostView(
            overcommit=overcommit_times(conf)))
        self.assertEqual(written, value(
            text, 'nova_pinning_overcommit_file_timestamp_seconds'))
        self.assertEqual(boot, value(
            text, 'nova_pinning_host_boot_time_seconds'))
        with open(path, 'w') as f:
            f.write('{not json')
        self.assertEqual(0.0, overcommit_times(conf)['written'])
        # [nova_pinning] allocation_ratio stands in for the file: no series.
        self.assertIsNone(overcommit_times(
            nova_like_conf(self, allocation_ratio=4.0)))
        self.assertTrue(os.path.exists(path))


class TestAgentCommand(LiveCliTestCase):
    """``nova-pinning agent``: nova-compute's pass worker under eventlet
    reads ``metrics_listen`` from nova's configuration and serves."""

    def test_worker_serves_on_metrics_listen(self):
        import signal
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.addCleanup(signal.signal, sig, signal.getsignal(sig))
        port = free_port()
        self.write_config(allocation_ratio=4.0, coalesce_delay=0,
                          metrics_listen='127.0.0.1:%d' % port)
        read_end, write_end = os.pipe()
        stdin = os.fdopen(read_end, 'r')
        self.addCleanup(stdin.close)
        self.useFixture(fixtures.MonkeyPatch('sys.stdin', stdin))
        url = 'http://127.0.0.1:%d/metrics' % port
        texts = []

        def scraped_a_pass():
            try:
                text = get(url, timeout=2)[2].decode()
            except OSError:
                return False
            texts.append(text)
            return value(text, 'nova_pinning_passes_total',
                         outcome='ok') >= 1

        def nova_compute():
            try:
                os.write(write_end, b'pass\n')
                wait_until(scraped_a_pass, 20)
            finally:
                os.close(write_end)  # nova-compute gone: the agent ends
        client = threading.Thread(target=nova_compute)
        client.start()
        code, out, err = self.run_cli('agent', '--requests-on-stdin')
        client.join(30)
        self.assertEqual(0, code, err)
        # nova-compute's worker logs where nova's configuration says; this
        # one names no log file, so oslo.log writes to standard output
        # (nova-compute's own, which the worker shares): log lines only.
        self.assertTrue(out, err)
        for line in out.splitlines():
            self.assertRegex(line, r'^\d{4}-\d\d-\d\d [\d:.]+ \d+ [A-Z]+ ')
        self.assertTrue(texts, 'never scraped')
        self.assertGreaterEqual(value(texts[-1], 'nova_pinning_passes_total',
                                      outcome='ok'), 1)
        self.assertEqual(2, value(texts[-1], 'nova_pinning_guest_vcpus',
                                  name='a', mode='dedicated'))

    def test_bad_metrics_listen_is_2(self):
        self.write_config(allocation_ratio=4.0,
                          metrics_listen='localhost:9179')
        self.assertRefused(self.run_cli('agent'), 2, 'metrics_listen')
