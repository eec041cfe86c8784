"""``nova-pinning-status upgrade check`` on both computes of the real
cloud, as each layout's operator runs it: on nph-compute1 from nova's
venv with nova-compute's configuration (OpenStack-Ansible's and the
distributions' way), on nph-compute2 inside kolla's ``nova_compute``
container (``podman exec``, kolla's venv and config files).

With the package on and a guest running on each compute, every check
that a healthy compute passes says ``Success``: nova (the probe in a
child Python of nova-compute's own environment), the libvirt binding,
the configuration, the notification driver, the overcommit file; none
says ``Failure``; the exit status is the worst result's (0 or 1, never
2 or 255). With the package off (``cloud.sh package off`` removes the
driver line and every pin), the same command still runs and refuses
nothing.
"""

import json
import os
import subprocess

from tests.cloud import base

SUCCESS, WARNING, FAILURE = 0, 1, 2  # oslo.upgradecheck's Code values
HEALTHY = ('nova', 'libvirt binding', 'configuration',
           'notification driver', 'overcommit file')


def check_argv(host):
    """The command as the operator of ``host``'s layout runs it."""
    n = base.host_index(host)
    if n == 2 and base._state('compute2-layout') == 'kolla':
        argv = ['podman', 'exec', base.KOLLA_PREFIX + 'nova_compute',
                '/var/lib/kolla/venv/bin/nova-pinning-status']
        for f in base.KOLLA_CONFIG_FILES:
            argv += ['--config-file', base.KOLLA_CONFIG + f]
        return argv + ['upgrade', 'check', '--json']
    with open('/run/nph-cloud/libvirtd%d.pid' % n) as f:
        pid = f.read().split()[0]
    with open(os.path.join(base.STATE, 'series')) as f:
        series = f.read().strip()
    venv = '/var/cache/nova-pinning-hooks/cloud/venv-%s' % series
    etc = os.path.join(base.STATE, 'etc', 'nova')
    return ['nsenter', '-t', pid, '-m', '-u', '-C', '--',
            venv + '/bin/nova-pinning-status',
            '--config-file', etc + '/nova.conf',
            '--config-file', '%s/compute%d.conf' % (etc, n),
            '--config-file', '%s/pinning%d.conf' % (etc, n),
            'upgrade', 'check', '--json']


class TestUpgradeCheck(base.CloudTestCase):

    def run_check(self, host):
        proc = subprocess.run(check_argv(host), capture_output=True,
                              text=True, timeout=300, check=False)
        self.assertIn(proc.returncode, (0, 1), (host, proc.returncode,
                                               proc.stdout, proc.stderr))
        report = json.loads(proc.stdout)
        results = {c['check'].lower(): c for c in report['checks']}
        worst = max(c['result'] for c in report['checks'])
        self.assertEqual(proc.returncode, worst, (host, report))
        return results

    def test_both_layouts(self):
        if base.package_state() != 'on':
            base.cloud('package', 'on')
        self.boot('uc-1', host='nph-compute1')
        self.boot('uc-2', host='nph-compute2')
        self.assert_pinned()
        for host in ('nph-compute1', 'nph-compute2'):
            results = self.run_check(host)
            for name in HEALTHY:
                self.assertIn(name, results, (host, sorted(results)))
                self.assertEqual(SUCCESS, results[name]['result'],
                                 (host, name, results[name]))
            failures = {k: v for k, v in results.items()
                        if v['result'] == FAILURE}
            self.assertEqual({}, failures, host)

    def test_package_off(self):
        self.addCleanup(base.cloud, 'package', 'on')
        base.cloud('package', 'off')
        for host in ('nph-compute1', 'nph-compute2'):
            results = self.run_check(host)
            failures = {k: v for k, v in results.items()
                        if v['result'] == FAILURE}
            self.assertEqual({}, failures, host)
