"""The metrics endpoint over HTTP (``httpserve``): a failed render, the
listen address, and what is served from the start. As the exporter and
the agent (``--listen``) serve it: tests/unit/cmd/test_httpserve.py; as
the binding service and nova-compute's pass thread
(``[nova_pinning] metrics_listen``): tests/unit/nova/test_httpserve.py.
"""

import array
import fcntl
import socket
import struct
import time

import fixtures
import testtools

from nova_pinning_hooks.observe import httpserve
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from tests.unit.scrape import get
from tests.unit.scrape import value
from tests.unit.scrape import wait_until

SIOCGIFADDR = 0x8915


def local_address():
    """An IPv4 address of this machine other than loopback (a peer other
    than 127.0.0.1 that needs no network), or None."""
    for _, name in socket.if_nameindex():
        if name == 'lo':
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                req = array.array('B', struct.pack('256s',
                                                   name.encode()[:15]))
                fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)
            except OSError:
                continue
            address = socket.inet_ntoa(req.tobytes()[20:24])
        if not address.startswith('127.'):
            return address
    return None


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


class TestPeers(testtools.TestCase):

    def test_peer_of(self):
        peer = httpserve.peer_of
        self.assertEqual('192.0.2.7', peer('192.0.2.7'))
        self.assertEqual('192.0.2.7', peer('::ffff:192.0.2.7'))
        # Any loopback address is one peer: a local user may connect
        # from any of 127.0.0.0/8.
        for address in ('127.0.0.1', '127.9.8.7', '::1',
                        '::ffff:127.0.0.2'):
            self.assertEqual(httpserve.LOOPBACK, peer(address))
        self.assertEqual('2001:db8:1:2::/64', peer('2001:db8:1:2::99'))
        self.assertEqual(peer('2001:db8:1:2::1'), peer('2001:db8:1:2:a::1'))
        self.assertEqual('fe80::/64', peer('fe80::1%eth0'))


class TestOneClientCannotStarveTheOthers(testtools.TestCase):
    """Issue 40, L-3: clients that open connections and never send a
    request (40 every 10 s, ``metrics_read_timeout``) held every one of
    the ``metrics_max_requests`` slots: every scrape was a 503 and
    nothing was logged, so the alert said the exporter was down."""

    MAX = 8

    def setUp(self):
        super().setUp()
        self.elsewhere = local_address()
        if self.elsewhere is None:
            self.skipTest('no IPv4 address but loopback on this machine: '
                          'no second peer')
        self.logs = self.useFixture(fixtures.FakeLogger())
        self.server = httpserve.MetricsServer(
            '0.0.0.0', 0, lambda: b'nova_pinning_up 1\n',
            max_requests=self.MAX, read_timeout=5.0).start()
        self.addCleanup(self.server.close)
        self.port = self.server.address[1]

    def hold(self, n, address='127.0.0.1'):
        """``n`` connections that never send a request, as a slow
        client's."""
        socks = []
        for _ in range(n):
            s = socket.create_connection((address, self.port), 5)
            self.addCleanup(s.close)
            socks.append(s)
        time.sleep(0.5)  # every one accepted
        return socks

    def test_a_slow_client_does_not_make_every_scrape_a_503(self):
        self.hold(self.MAX * 2)  # every slot, and more, from loopback
        status = get('http://%s:%d/metrics' % (self.elsewhere, self.port),
                     timeout=5)[0]
        self.assertEqual(200, status, 'a scrape from another peer')
        # The client itself is refused beyond its share, at once.
        self.assertEqual(503, get('http://127.0.0.1:%d/metrics'
                                  % self.port, timeout=5)[0])
        self.assertEqual(self.MAX * 2 + 1 - 4, self.server.refused)
        self.assertEqual(self.server.refused, self.server.refused_per_peer)

    def test_refusals_are_logged_once_a_minute_at_most(self):
        self.hold(4 + 10)
        self.assertTrue(wait_until(lambda: self.server.refused == 10, 5))
        lines = [line for line in self.logs.output.splitlines()
                 if 'refused' in line]
        self.assertEqual(1, len(lines), self.logs.output)
        self.assertIn('metrics endpoint 0.0.0.0:%d: refused 1 '
                      'connection(s) with 503 (1 over 4 requests at once '
                      'from one peer, 0 over 8 in all), most from '
                      'loopback (1)' % self.port, lines[0])


class TestServedFromTheStart(testtools.TestCase):
    """What a panel or an alert reads exists on a quiet host: zero, not
    absent ("No data"). (The overcommit file's times:
    tests/unit/nova/test_httpserve.py.)"""

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

    def test_the_isolation_agents_status_time_and_staleness(self):
        # Where no agent published anything: 0 and 0.
        text = metrics.exposition(metrics.HostView(isolation={
            'state': 'not applied', 'status_written': 0,
            'status_stale': False}))
        self.assertEqual(0, value(
            text, 'nova_pinning_isolation_status_timestamp_seconds'))
        self.assertEqual(0, value(text, 'nova_pinning_isolation_status_stale'))
        text = metrics.exposition(metrics.HostView(isolation={
            'state': 'applied', 'mode': 'systemd', 'confined': 3,
            'not_confined': 0, 'status_written': 1764150000.5,
            'status_stale': True}))
        self.assertEqual(1764150000.5, value(
            text, 'nova_pinning_isolation_status_timestamp_seconds'))
        self.assertEqual(1, value(text, 'nova_pinning_isolation_status_stale'))
        # The last published values stay, marked stale.
        self.assertEqual(3, value(
            text, 'nova_pinning_isolation_confined_units'))

    def test_systemd_counts_units(self):
        text = metrics.exposition(metrics.HostView(isolation={
            'state': 'applied', 'mode': 'systemd', 'not_confined': 1}))
        self.assertEqual(1, value(
            text, 'nova_pinning_isolation_not_confined_units'))

    def test_counts_are_integers_only(self):
        # issue 60: a float count raised out of generate_latest (len of
        # a float); a list or a bool was served as a number.
        for bad in (1.5, ['a.service'], True, -1, 'x', None):
            text = metrics.exposition(metrics.HostView(isolation={
                'state': 'applied', 'mode': 'systemd', 'confined': bad,
                'not_confined': bad, 'irqs_moved': bad,
                'irqs_on_one_to_one': bad}))
            for name in ('confined_units', 'not_confined_units',
                         'irqs_moved', 'irqs_on_one_to_one'):
                self.assertEqual(0, value(
                    text, 'nova_pinning_isolation_' + name), (bad, name))
