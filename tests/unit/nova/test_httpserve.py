"""The metrics endpoint over HTTP (``httpserve``) as the process that
runs the passes serves it: the agent's binding service and nova-compute's
pass thread (``[nova_pinning] metrics_listen``), and the overcommit
file's times served from the start. The endpoint itself:
tests/unit/observe/test_httpserve.py; the exporter and the agent
command: tests/unit/cmd/test_httpserve.py."""

import os
import socket
import time

import fixtures
import testtools

from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.passes import settings
from nova_pinning_hooks.runtime import settings as runtime_settings
from tests.fixtures import FakeLibvirtFixture
from tests.fixtures import pass_runner
from tests.unit import hosts
from tests.unit.novaconf import nova_like_conf
from tests.unit.scrape import free_port
from tests.unit.scrape import get
from tests.unit.scrape import samples
from tests.unit.scrape import value


def overcommit_times(conf):
    """The file's times as a scrape sees them (settings read once)."""
    try:
        read = settings.load(settings.read(conf).ratio)
    except settings.SettingsError:
        read = None
    return metrics.overcommit_times(settings.read(conf).ratio, read)


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
        svc = service.BindingService(runtime_settings.read(conf),
                                     service.Role(events=False))
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
        a = pass_runner(conf, False)
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
            a = pass_runner(conf, False)
            self.addCleanup(a.stop)
            a.start()  # no exception into nova-compute
            self.assertTrue(a.coalescer.request('t', wait=True, timeout=30))
        self.assertIn('metrics not served', logs.output)
        self.assertIsNone(a.last_result.error)


class TestServedFromTheStart(testtools.TestCase):
    """What a panel or an alert reads exists on a quiet host: zero, not
    absent ("No data"). (The counters and gauges:
    tests/unit/observe/test_httpserve.py.)"""

    def test_overcommit_file_timestamp(self):
        conf = nova_like_conf(self)
        path = conf.nova_pinning.overcommit_file
        times = overcommit_times(conf)
        self.assertEqual(0.0, times['written'])  # missing
        boot = times['boot']
        self.assertLess(boot, time.time())
        a = pass_runner(conf, False)
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
