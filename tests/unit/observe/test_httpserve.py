"""The metrics endpoint over HTTP (``httpserve``): a failed render, the
listen address, and what is served from the start. As the exporter and
the agent (``--listen``) serve it: tests/unit/cmd/test_httpserve.py; as
the binding service and nova-compute's pass thread
(``[nova_pinning] metrics_listen``): tests/unit/nova/test_httpserve.py.
"""

import testtools

from nova_pinning_hooks.observe import httpserve
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from tests.unit.scrape import value


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
            'state': 'applied', 'mode': 'systemd',
            'not_confined': ['a.service']}))
        self.assertEqual(1, value(
            text, 'nova_pinning_isolation_not_confined_units'))
