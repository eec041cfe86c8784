"""Day two: nova's rolling upgrade with the package, guests running.

nph-compute1 runs nova-compute of the release before the newest of
tools/nova-releases (33 under 34: its series' upper-constraints,
tools/constraints/nova-33.txt, and the package's wheel) under the
cloud's control plane of the newest, then is upgraded in place to the
newest (``cloud.sh compute-series 1 33|34``), as operators roll computes
one release behind the control plane. Each step is sampled; the package's
activation line says which nova ``compat`` found ("nova 33.0.2, every
part found"), and every server stays ACTIVE and pinned."""

import os
import re

from tests.cloud import base as cloud_base
from tests.day2 import base
from tests import nova_releases


class TestRollingUpgrade(base.DayTwoCase):

    def setUp(self):
        super().setUp()
        # To the newest release from the one before it (tools/nova-releases).
        self.new = nova_releases.newest().series
        self.old = nova_releases.before(self.new).series
        if cloud_base._state('series') != str(self.new):
            self.skipTest('a rolling upgrade to %d: the cloud is series %s'
                          % (self.new, cloud_base._state('series')))
        self.package('on')
        self.addCleanup(cloud_base.cloud, 'compute-series', '1',
                        str(self.new), timeout=1800)

    def activation_lines(self, since):
        path = os.path.join(cloud_base.LOG, 'nova-compute1.log')
        with open(path, 'rb') as f:
            f.seek(since)
            text = f.read().decode('utf-8', 'replace')
        return re.findall(r'nova-pinning-hooks: active \(.*', text)

    def test_compute_one_release_behind_then_upgraded(self):
        servers = self.fleet()
        log = os.path.join(cloud_base.LOG, 'nova-compute1.log')
        old, new = self.old, self.new
        for step, series in (
                ('nph-compute1 on nova %d under %d' % (old, new), str(old)),
                ('nph-compute1 upgraded %d -> %d' % (old, new), str(new))):
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
        self.assert_pinned()
