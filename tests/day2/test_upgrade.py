"""Day two: the package upgraded from its 1.0.0 release (the commit
RELEASES names, its wheel) to this checkout and rolled back, with
guests running, the way each layout does it:

* nph-compute1 (OpenStack-Ansible, distribution packages): the wheel into
  nova's virtualenv, nova-compute restarted;
* nph-compute2 in kolla's containers: the image rebuilt with the wheel
  (``NPH_KOLLA_WHEEL``, tools/kolla-images.sh) and nova_compute recreated,
  as ``kolla-ansible upgrade`` does (``cloud.sh restart-compute 2``).

Each step is sampled (0 unpinned guest-seconds beyond one pass per
event) and every server stays ACTIVE. nova-scheduler runs nova's own
weighers meanwhile (1.0.0 has no OneToOneWeigher; the virtualenv is
shared with the computes here, as it is not on a real control plane).
At the end this checkout's package is back everywhere.
"""

import glob
import os
import re
import subprocess
import tempfile

from tests import releases
from tests.cloud import base as cloud_base
from tests.day2 import base

RELEASE_1_0_0 = dict(releases.lib.read(cloud_base.TOP))['1.0.0']


def wheel(source, out, version=None):
    """The package's wheel built from ``source``; ``version`` for a tree
    without git's history (pbr reads the version from git otherwise)."""
    env = dict(os.environ)
    if version:
        env['PBR_VERSION'] = version
    subprocess.run(['python3', '-m', 'pip', 'wheel', '--no-deps', '-q',
                    '-w', out, source], check=True, timeout=600,
                   capture_output=True, env=env)
    return glob.glob(os.path.join(out, 'nova_pinning_hooks-*.whl'))[0]


class TestUpgradeAndRollback(base.DayTwoCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix='nph-day2-wheels.')
        src = os.path.join(cls.tmp, 'release-1.0.0')
        os.makedirs(src)
        archive = subprocess.run(
            ['git', '-C', cloud_base.TOP, 'archive', RELEASE_1_0_0],
            check=True, timeout=120, capture_output=True).stdout
        subprocess.run(['tar', '-x', '-C', src], input=archive, check=True,
                       timeout=120)
        cls.old = wheel(src, os.path.join(cls.tmp, 'old'), version='1.0.0')
        cls.new = wheel(cloud_base.TOP, os.path.join(cls.tmp, 'new'))
        # The wheels are the releases they say they are: 1.0.0, and the
        # version this commit builds (1.1.0 on its release commit).
        assert os.path.basename(cls.old).startswith(
            'nova_pinning_hooks-1.0.0-'), cls.old
        assert re.fullmatch(releases.expected_version(cloud_base.TOP),
                            os.path.basename(cls.new).split('-')[1]), cls.new

    def setUp(self):
        super().setUp()
        self.package('on')
        cloud_base.cloud('weigher', 'off')
        self.addCleanup(cloud_base.cloud, 'weigher', 'on')
        self.addCleanup(self.install, self.new)

    def venv(self):
        return '/var/cache/nova-pinning-hooks/cloud/venv-%s' % \
            cloud_base._state('series')

    def install(self, whl):
        """``whl`` in both computes, each the way its layout does."""
        subprocess.run([self.venv() + '/bin/pip', 'install', '-q',
                        '--no-deps', '--force-reinstall', whl],
                       check=True, timeout=600, capture_output=True)
        cloud_base.cloud('restart-compute', '1')
        env = dict(os.environ)
        if cloud_base._state('compute2-layout') == 'kolla':
            env['NPH_KOLLA_WHEEL'] = whl
        proc = subprocess.run([cloud_base.CLOUD, 'restart-compute', '2'],
                              env=env, timeout=1800, capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            raise cloud_base.CloudCommandFailed(
                'cloud.sh restart-compute 2: exit %d: %s' % (
                    proc.returncode, proc.stderr.strip()[-800:]))

    def settled(self, servers):
        for s in servers:
            self.wait_status(s, 'ACTIVE', timeout=300)
        self.assert_pinned()

    # 1.0.0 opens libvirt without credentials: against a libvirtd that
    # asks for SASL (kolla-ansible's default, libvirt_enable_sasl, and
    # this cloud's nova_libvirt since issue 40's L-4) its passes fail
    # in kolla's nova_compute while it runs there. Expected of 1.0.0
    # (release note: rolling back to it on such a host), nothing else.
    SASL_1_0_0 = ('nova_pinning_hooks.passes.reconciler',
                  'rebinding pass failed', 'SASL(-4): no mechanism available')

    def step_errors(self, sizes, old_in_kolla):
        """The nova-computes' ERRORs since ``sizes``: (unexpected, the
        1.0.0 SASL failures)."""
        errors = cloud_base.compute_log_errors(sizes)
        sasl = [e for e in errors if old_in_kolla and
                all(part in e for part in self.SASL_1_0_0)]
        return [e for e in errors if e not in sasl], sasl

    def test_from_1_0_0_and_back(self):
        kolla = cloud_base._state('compute2-layout') == 'kolla'
        self.install(self.old)
        servers = self.fleet()
        for step, whl in (('upgrade 1.0.0 -> this', self.new),
                          ('rollback this -> 1.0.0', self.old),
                          ('upgrade 1.0.0 -> this again', self.new)):
            sizes = cloud_base.log_sizes()
            figures = self.sample(lambda w=whl: self.install(w),
                                  settle=lambda: self.settled(servers))
            # The old release ran before an upgrade's restart and after
            # a rollback's.
            unexpected, sasl = self.step_errors(sizes, kolla)
            result = self.record('package %s' % step,
                                 errors=unexpected[:5],
                                 sasl_failures_of_1_0_0=len(sasl), **figures)
            self.assertEqual(0.0, result['beyond_one_pass'], result)
            self.assertEqual({'ACTIVE'}, set(result['outcome'].values()),
                             result)
            self.assertEqual([], unexpected, result)
