#!/usr/bin/env python3
"""Draw the Grafana dashboard's main panel ("Steal per guest") from the
answers a real Prometheus gave: a PNG for doc/source/admin/steal.rst where
Grafana is not available.

Usage (the answers come from the functional test, see its module doc):
    NPH_PROMETHEUS_DUMP=/tmp/steal.json NPH_PROMETHEUS_RUN_SECONDS=90 \\
        flock /run/nph-functional.lock tox -e functional -- \\
        tests.functional.test_prometheus
    python3 tools/plot-steal-panel.py /tmp/steal.json \\
        doc/source/admin/steal-panel.png

Needs matplotlib (Debian's python3-matplotlib, or pip in a throwaway
venv); nothing else of the package.
"""

import json
import sys


def main(argv):
    if len(argv) != 3:
        sys.stderr.write('usage: plot-steal-panel.py ANSWERS.json OUT.png\n')
        return 2
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot
    with open(argv[1]) as f:
        answers = json.load(f)
    fig, ax = pyplot.subplots(figsize=(7, 3), dpi=100)
    start = min(float(v[0]) for r in answers['result'] for v in r['values'])
    for series in sorted(answers['result'],
                         key=lambda r: r['metric']['name']):
        xs = [float(t) - start for t, _ in series['values']]
        ys = [100 * float(v) for _, v in series['values']]
        ax.plot(xs, ys, label=series['metric']['name'])
    ax.set_title('Steal per guest (share of its vCPUs\' time), rate over %s'
                 % answers['window'], fontsize=10)
    ax.set_xlabel('seconds')
    ax.set_ylabel('steal %')
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc='center right')
    fig.tight_layout()
    fig.savefig(argv[2])
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
