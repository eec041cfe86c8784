"""Prometheus metrics of the binding service: the textfile written after
each pass. (The exposition: tests/unit/observe/test_metrics.py.)"""

import os

import fixtures
import testtools

from nova_pinning_hooks.runtime import service
from nova_pinning_hooks.runtime import settings as runtime_settings
from tests.fixtures import FakeLibvirtFixture
from tests.unit import hosts
from tests.unit.novaconf import nova_like_conf
from tests.unit.scrape import value


class TestTextfileInTheAgent(testtools.TestCase):
    """``nova-pinning agent`` (``service.BindingService``), which is also
    nova-compute's worker process under eventlet, writes it too."""

    def test_written_after_each_pass_with_counts_of_the_process(self):
        fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        fake.add_domain('g', 2, xml=hosts.domain_xml('g', 2))
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova_pinning.prom')
        conf = nova_like_conf(self, metrics_textfile=path,
                              allocation_ratio=4.0)
        svc = service.BindingService(runtime_settings.read(conf),
                                     service.Role(events=False))
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
