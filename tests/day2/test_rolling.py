"""Day two: nova's rolling upgrade with the package, guests running.

nph-compute1 runs nova-compute 33 (its series' upper-constraints,
tools/constraints/nova-33.txt, and the package's wheel) under the
cloud's nova 34 control plane, then is upgraded in place to 34
(``cloud.sh compute-series 1 33|34``), as operators roll computes one
release behind the control plane. Each step is sampled; the package's
activation line says which nova ``compat`` found ("nova 33.0.2, every
part found"), and every server stays ACTIVE and pinned."""

import os
import re

from tests.cloud import base as cloud_base
from tests.day2 import base


class TestRollingUpgrade(base.DayTwoCase):

    def setUp(self):
        super().setUp()
        if cloud_base._state('series') != '34':
            self.skipTest('a rolling upgrade to 34: the cloud is series %s'
                          % cloud_base._state('series'))
        self.package('on')
        self.addCleanup(cloud_base.cloud, 'compute-series', '1', '34',
                        timeout=1800)

    def activation_lines(self, since):
        path = os.path.join(cloud_base.LOG, 'nova-compute1.log')
        with open(path, 'rb') as f:
            f.seek(since)
            text = f.read().decode('utf-8', 'replace')
        return re.findall(r'nova-pinning-hooks: active \(.*', text)

    def test_compute_on_33_then_upgraded_to_34(self):
        servers = self.fleet()
        log = os.path.join(cloud_base.LOG, 'nova-compute1.log')
        for step, series in (('nph-compute1 on nova 33 under 34', '33'),
                             ('nph-compute1 upgraded 33 -> 34', '34')):
            size = os.path.getsize(log)
            figures = self.sample(
                lambda s=series: cloud_base.cloud(
                    'compute-series', '1', s, timeout=1800),
                settle=lambda: self.settled(servers))
            lines = self.activation_lines(size)
            result = self.record('rolling upgrade: ' + step,
                                 activation=lines, **figures)
            self.assertEqual(0.0, result['beyond_one_pass'], result)
            self.assertEqual({'ACTIVE'}, set(result['outcome'].values()),
                             result)
            self.assertTrue(any('nova %s.' % series in ln for ln in lines),
                            lines)
        self.assert_no_compute_error()

    def settled(self, servers):
        for s in servers:
            self.wait_status(s, 'ACTIVE', timeout=300)
        self.assert_pinned(timeout=120)
