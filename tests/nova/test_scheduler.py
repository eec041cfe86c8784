"""The summary and the weigher with the real nova from PyPI: nova's
``ResourceTracker._update`` saves the summary the package's hook put in
the compute node's stats; nova-scheduler's ``HostState`` reads it and
nova's weight handler weighs ``OneToOneWeigher``, loaded by class path
from ``[filter_scheduler] weight_classes``
(``scheduler_child.py`` in a child process)."""

import json
import os
import subprocess
import sys

import fixtures
import testtools

from nova_pinning_hooks.engine import hostchoice
from nova_pinning_hooks.engine import summary as summary_mod

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, 'scheduler_child.py')
# weight_classes is a list option: one line (a second would replace it,
# and nova's own weighers would be gone: seen with two lines).
CONF = """[DEFAULT]
transport_url = fake:/
state_path = {tmp}
[filter_scheduler]
weight_classes = nova.scheduler.weights.all_weighers,""" \
    """nova_pinning_hooks.nova.weigher.OneToOneWeigher
[nova_pinning]
weigher_multiplier = 10
"""
UUID = '6f1c9a2e-3b4d-4c5e-8f7a-9b0c1d2e3f4a'


class TestScheduler(testtools.TestCase):

    def test_summary_from_tracker_to_weigher(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write(CONF.format(tmp=tmp))
        proc = subprocess.run([sys.executable, CHILD, path],
                              capture_output=True, text=True, timeout=600,
                              env=dict(os.environ,
                                       NPH_TEST_INSTANCE_UUID=UUID))
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        lines = [x for x in proc.stdout.splitlines()
                 if x.startswith('REPORT ')]
        self.assertEqual(1, len(lines), proc.stdout + proc.stderr[-3000:])
        r = json.loads(lines[0][len('REPORT '):])
        # Compute side: nova's _update ran after the hook and saved the
        # node with its stats changed, the summary beside nova's keys.
        self.assertTrue(r['tracker_hooked'])
        self.assertEqual(1, len(r['saved']), r['saved'])
        changed, stats = r['saved'][0]
        self.assertIn('stats', changed)
        self.assertEqual('up', stats['uptime'])
        self.assertEqual(6, json.loads(stats['nova_pinning_numa'])['n'][0][2])
        # Scheduler side: loaded from weight_classes beside nova's own.
        self.assertIn('OneToOneWeigher', r['weighers'])
        self.assertIn('RAMWeigher', r['weighers'])
        # Fixed bounds -1..1, multiplier 10: one-to-one on a node full
        # after the guest, the candidates' pools full: FIT_FLOOR and the
        # request's draw (engine/hostchoice.py); no summary 5 (neutral),
        # guests losing one-to-one 2.
        fits = summary_mod.FIT_FLOOR + (1 - summary_mod.FIT_FLOOR) * \
            hostchoice.draw(UUID, 'fits')
        self.assertEqual({'fits': round((fits + 1) / 2 * 10, 6),
                          'none': 5.0, 'loses': 2.0}, r['ours'])
        self.assertGreaterEqual(r['ours']['fits'], 8.0)
        # nova's CPU weigher alone prefers the emptiest host.
        self.assertEqual('none', r['order_without'][0])
        self.assertEqual(['fits', 'none', 'loses'], r['order'])
        self.assertEqual({'fits': 5.0, 'none': 5.0, 'loses': 5.0},
                         r['dedicated'])
        self.assertEqual({'fits': 2.0, 'none': 5.0, 'loses': 2.0},
                         r['after_consume'])
        self.assertEqual({'fits': 0.4, 'none': 1.0, 'loses': 0.4},
                         r['aggregate'])
