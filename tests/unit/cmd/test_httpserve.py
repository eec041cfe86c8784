"""The metrics endpoint over HTTP (``httpserve``) as the nova-pinning
command serves it: the exporter (bounded threads, a total read
deadline, 404 and HEAD) and the agent (``--listen``, nova's
``metrics_listen``). The endpoint itself:
tests/unit/observe/test_httpserve.py; in nova-compute's pass thread:
tests/unit/nova/test_httpserve.py."""

import os
import socket
import threading
import time

import fixtures

from nova_pinning_hooks.cmd import pinning
from nova_pinning_hooks.observe import endpoint as endpoint_mod
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from nova_pinning_hooks.observe import settings as observe_settings
from tests.unit.cmd.test_cli_live import LiveCliTestCase
from tests.unit.scrape import free_port
from tests.unit.scrape import get
from tests.unit.scrape import value
from tests.unit.scrape import wait_until

MAX_REQUESTS = 4
READ_TIMEOUT = 1.0


class TestExporterEndpoint(LiveCliTestCase):
    """Through ``endpoint.serve``, what ``nova-pinning exporter`` runs."""

    def setUp(self):
        super().setUp()
        self.write_config(allocation_ratio=4.0, busy_retries=0,
                          busy_retry_delay=0,
                          metrics_max_requests=MAX_REQUESTS,
                          metrics_read_timeout=READ_TIMEOUT)
        conf = pinning.parse_args(['--config-file', self.config, 'metrics'])
        rec = reconciler.Reconciler(settings_mod.read(conf))
        self.addCleanup(rec.close)
        self.port = free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        stop = threading.Event()
        self.addCleanup(stop.set)
        self.baseline = threading.active_count()
        threading.Thread(target=endpoint_mod.serve, daemon=True,
                         args=(rec, observe_settings.read(conf),
                               '127.0.0.1', self.port,
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
        except TimeoutError:
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
            except (TimeoutError, OSError) as exc:
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
