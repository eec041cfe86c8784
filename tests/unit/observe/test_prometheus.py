"""The shipped Prometheus files, checked by Debian's promtool (package
``prometheus``, installed by tools/setup-host.sh): the configuration and
the rules pass ``promtool check``, every alert has ``promtool test
rules`` cases, and every dashboard query parses (and names only series
the package exports: tests/unit/nova/test_prometheus.py)."""

import os
import shutil
import subprocess

import fixtures
import testtools
import yaml

from tests import promql

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
        doc/source/admin/runbook.rst: a title naming the alert (Sphinx's anchor
        is the title in lower case), with what it means, what to check
        and what to do."""
        with open(os.path.join(promql.TOP, 'doc', 'source',
                               'admin', 'runbook.rst')) as f:
            lines = f.read().splitlines()
        sections = {}
        for i, line in enumerate(lines[1:], 1):
            if line and set(line) == {'='} and len(line) == len(lines[i - 1]):
                sections[lines[i - 1]] = i
        rules = promql.alert_rules()
        self.assertEqual(9, len(rules))
        for name, rule in rules.items():
            self.assertEqual('admin/runbook.html#' + name.lower(),
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
