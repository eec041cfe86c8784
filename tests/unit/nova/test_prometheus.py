"""The shipped dashboard and alerts name only series the package exports:
every series, read from a host with a guest, the overcommit file as
nova-compute writes it, isolation under both backends and passes. (The
shipped Prometheus files under promtool:
tests/unit/observe/test_prometheus.py.)"""

from prometheus_client import parser
import testtools

from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from nova_pinning_hooks.observe import settings as observe_settings
from tests.fixtures import FakeLibvirtFixture
from tests.fixtures import pass_runner
from tests import promql
from tests.unit import hosts
from tests.unit.novaconf import nova_like_conf


class TestDashboardSeries(testtools.TestCase):

    def exported(self):
        """Every sample name the package can export: a host with a guest,
        the overcommit file, isolation under both backends, passes."""
        fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        fake.add_domain('g', 2, xml=hosts.domain_xml('g', 2))
        conf = nova_like_conf(self)
        a = pass_runner(conf, False)
        self.addCleanup(a.stop)
        self.assertTrue(a.ratio_file.write(2.0))
        rec = reconciler.Reconciler(settings_mod.read(conf))
        self.addCleanup(rec.close)
        stats = passstats.PassStats()
        stats.record(rec.run_pass())
        names = set()
        for mode in ('v1', 'systemd'):
            view = metrics.read_view(rec, observe_settings.read(conf),
                                     isolation=False)
            self.assertEqual([], view.errors)
            view.isolation = {'state': 'applied', 'mode': mode}
            text = metrics.exposition(view, stats)
            for family in parser.text_string_to_metric_families(text):
                names.update(s.name for s in family.samples)
        return names

    def test_queries_and_alerts_name_only_exported_series(self):
        exported = self.exported()
        self.assertIn('nova_pinning_pass_duration_seconds_count', exported)
        named = {}
        for title, _ref, expr in promql.dashboard_queries():
            for series in promql.series_named(expr):
                named.setdefault(series, []).append('panel %r' % title)
        for name, rule in promql.alert_rules().items():
            for series in promql.series_named(rule['expr']):
                named.setdefault(series, []).append('alert %s' % name)
        missing = {s: where for s, where in named.items()
                   if s not in exported}
        self.assertEqual({}, missing, 'named but not exported')
        # Not vacuous: the steal panel's series is among those checked.
        self.assertIn('nova_pinning_vcpu_delay_seconds_total', named)
