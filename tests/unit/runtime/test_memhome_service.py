"""The memory-home thread in the binding service (issue 61): started
by ``[nova_pinning] memory_home``, on by default; its moves counted in the
metrics (``nova_pinning_memory_home_moves_total``) with their libvirt
calls among the passes'."""

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.runtime import service as service_mod
from nova_pinning_hooks.runtime import settings as runtime_settings


class TestMemoryHomeInTheService(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        conf_mod.register_opts(self.conf)
        self.useFixture(config_fixture.Config(self.conf))
        tmp = self.useFixture(fixtures.TempDir()).path
        self.conf.set_override('lock_path', tmp, group='nova_pinning')

    def service(self):
        svc = service_mod.BindingService(runtime_settings.read(self.conf))
        self.addCleanup(svc.reconciler.close)
        return svc

    def test_on_by_default_off_by_option(self):
        self.assertTrue(self.conf.nova_pinning.memory_home)
        self.assertIsNotNone(self.service().memory_home)
        self.conf.set_override('memory_home', False, group='nova_pinning')
        self.assertIsNone(self.service().memory_home)

    def test_moves_and_their_calls_are_counted(self):
        stats = passstats.PassStats()
        text = metrics.exposition(metrics.HostView(), stats)
        for result in ('moved', 'no-room', 'too-large', 'timeout',
                       'failed', 'gone'):
            self.assertIn('nova_pinning_memory_home_moves_total'
                          '{result="%s"} 0.0' % result, text)
        stats.record_memory_home('moved', {'read': 2, 'write': 2})
        stats.record_memory_home(None, {'read': 0, 'write': 1})
        text = metrics.exposition(metrics.HostView(), stats)
        self.assertIn('nova_pinning_memory_home_moves_total'
                      '{result="moved"} 1.0', text)
        self.assertIn('nova_pinning_libvirt_calls_total{kind="write"} 3.0',
                      text)
