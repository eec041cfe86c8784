"""What the shipped dashboard and alert rules ask Prometheus: their
queries, with Grafana's variables filled in, and the series they name.
Shared by the unit test (promtool) and the functional test (a real
Prometheus)."""

import json
import os
import re

import yaml

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
DASHBOARD = os.path.join(TOP, 'etc', 'grafana', 'nova-pinning-steal.json')
RULES = os.path.join(TOP, 'etc', 'prometheus', 'nova-pinning.rules')
CONFIG = os.path.join(TOP, 'etc', 'prometheus', 'prometheus.yml')
RULES_TEST = os.path.join(TOP, 'tests', 'unit', 'prometheus',
                          'rules_test.yml')
SERIES = re.compile(r'\b(nova_pinning_[a-z_]+)\b')


def dashboard_queries():
    """[(panel title, refId, expr)] of every panel of the dashboard."""
    with open(DASHBOARD) as f:
        board = json.load(f)
    out = []
    for panel in board['panels']:
        for target in panel.get('targets', ()):
            out.append((panel['title'], target.get('refId', ''),
                        target['expr']))
    return out


def fill(expr, instance='.*', rate_interval='1m'):
    """``expr`` with Grafana's variables as Prometheus takes them."""
    return (expr.replace('$__rate_interval', rate_interval)
            .replace('$instance', instance))


def alert_rules():
    """{alert name: rule dict} of the shipped rule file."""
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    return {r['alert']: r for g in doc['groups'] for r in g['rules']
            if 'alert' in r}


def series_named(expr):
    """The package's series (sample names) an expression reads."""
    return set(SERIES.findall(expr))
