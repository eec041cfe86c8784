"""The shipped Prometheus files, checked by Debian's promtool (package
``prometheus``, installed by tools/setup-host.sh): the configuration and
the rules pass ``promtool check``, every alert has ``promtool test
rules`` cases, and every dashboard query parses and names only series
the package exports."""

import os
import shutil
import subprocess

import fixtures
import testtools
import yaml

from prometheus_client import parser

from nova_pinning_hooks.nova import runtime
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.passes import reconciler
from tests.fixtures import FakeLibvirtFixture
from tests import promql
from tests.unit import hosts
from tests.unit.nova.test_agent import nova_like_conf

PROMTOOL = shutil.which('promtool') or '/usr/bin/promtool'


def promtool(*args, cwd=None):
    if not os.access(PROMTOOL, os.X_OK):
        raise AssertionError('promtool is not installed: Debian\'s package '
                             'prometheus (tools/setup-host.sh installs it)')
    return subprocess.run([PROMTOOL] + list(args), capture_output=True,
                          text=True, timeout=120, cwd=cwd)


class TestPromtool(testtools.TestCase):

    def test_shipped_config_and_rules_pass_promtool_check(self):
        proc = promtool('check', 'config', promql.CONFIG)
        self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
        proc = promtool('check', 'rules', promql.RULES)
        self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
        self.assertIn('%d rules found' % len(promql.alert_rules()),
                      proc.stdout)

    def test_rule_unit_tests_pass(self):
        proc = promtool('test', 'rules', os.path.basename(promql.RULES_TEST),
                        cwd=os.path.dirname(promql.RULES_TEST))
        self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
        self.assertIn('SUCCESS', proc.stdout)

    def test_every_alert_has_a_case_where_it_fires(self):
        with open(promql.RULES_TEST) as f:
            cases = yaml.safe_load(f)
        firing = {t['alertname'] for group in cases['tests']
                  for t in group.get('alert_rule_test', ())
                  if t.get('exp_alerts')}
        self.assertEqual(set(promql.alert_rules()), firing)

    def test_every_alert_has_a_runbook_section(self):
        """Each alert's runbook_url is its own section of
        doc/source/runbook.rst: a title naming the alert (Sphinx's anchor
        is the title in lower case), with what it means, what to check
        and what to do."""
        with open(os.path.join(promql.TOP, 'doc', 'source',
                               'runbook.rst')) as f:
            lines = f.read().splitlines()
        sections = {}
        for i, line in enumerate(lines[1:], 1):
            if line and set(line) == {'='} and len(line) == len(lines[i - 1]):
                sections[lines[i - 1]] = i
        rules = promql.alert_rules()
        self.assertEqual(8, len(rules))
        for name, rule in rules.items():
            self.assertEqual('runbook.html#' + name.lower(),
                             rule['annotations'].get('runbook_url'), name)
            self.assertIn(name, sections)
            nxt = min([n for n in sections.values() if n > sections[name]]
                      + [len(lines)])
            body = lines[sections[name]:nxt]
            for head in ('What it means', 'What to check', 'What to do'):
                self.assertIn(head, body, name)

    def test_rules_file_is_named_as_kolla_ansible_loads(self):
        # kolla-ansible's prometheus role finds "*.rules" files only.
        self.assertTrue(promql.RULES.endswith('.rules'))
        with open(promql.CONFIG) as f:
            config = yaml.safe_load(f)
        self.assertEqual([os.path.basename(promql.RULES)],
                         config['rule_files'])

    def test_dashboard_queries_parse(self):
        """Each query as a recording rule: promtool parses its PromQL."""
        tmp = self.useFixture(fixtures.TempDir()).path
        rules = {'groups': [{'name': 'dashboard', 'rules': [
            {'record': 'dashboard:q%d' % i, 'expr': promql.fill(expr)}
            for i, (_, _, expr) in enumerate(promql.dashboard_queries())]}]}
        path = os.path.join(tmp, 'dashboard.yml')
        with open(path, 'w') as f:
            yaml.safe_dump(rules, f)
        proc = promtool('check', 'rules', path)
        self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)


class TestDashboardSeries(testtools.TestCase):

    def exported(self):
        """Every sample name the package can export: a host with a guest,
        the overcommit file, isolation under both backends, passes."""
        fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        fake.add_domain('g', 2, xml=hosts.domain_xml('g', 2))
        conf = nova_like_conf(self)
        a = runtime.Runtime(conf, out_of_process=False)
        self.addCleanup(a.stop)
        self.assertTrue(a.ratio_file.write(2.0))
        rec = reconciler.Reconciler(conf)
        self.addCleanup(rec.close)
        stats = passstats.PassStats()
        stats.record(rec.run_pass())
        names = set()
        for mode in ('v1', 'systemd'):
            view = metrics.read_view(rec, conf, isolation=False)
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
