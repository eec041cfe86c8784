"""nph-compute2 in kolla-ansible's containers (``tools/cloud.sh up
--compute2 kolla``; doc/source/deploy.rst, "The cloud's nph-compute2 in
kolla's containers"): the layout as the kernel shows it, and the
package's PID-namespace handling inside that real nova-compute. The
other tests of tests/cloud run against either layout; these only
against kolla's (skipped, and said so, in the host layout)."""

import json
import os
import subprocess

from tests.cloud import base

PREFIX = 'nph_cloud_'  # tools/cloud.sh's KOLLA_PREFIX
CONFIG = '/var/lib/kolla/config_files/'
CONFIG_FILES = ('nova.conf', 'cpu-mode.conf', 'compute2.conf',
                'pinning2.conf', 'kolla.conf')


def container_pid(name):
    out = subprocess.run(
        ['podman', 'container', 'inspect', '-f', '{{.State.Pid}}',
         PREFIX + name], capture_output=True, text=True, timeout=60,
        check=True).stdout
    return int(out.strip())


def nova_pinning_argv():
    """``nova-pinning`` in nova_compute with nova-compute's own
    configuration, as an operator runs it there (``podman exec``)."""
    argv = ['podman', 'exec', PREFIX + 'nova_compute',
            '/var/lib/kolla/venv/bin/nova-pinning']
    for f in CONFIG_FILES:
        argv += ['--config-file', CONFIG + f]
    return argv


def namespace(pid, kind):
    return os.readlink('/proc/%s/ns/%s' % (pid, kind))


class TestKollaLayout(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if base._state('compute2-layout') != 'kolla':
            self.skipTest('nph-compute2 runs in the host layout: '
                          'tools/cloud.sh up --compute2 kolla')

    def test_compute2_runs_in_kollas_containers(self):
        compute = container_pid('nova_compute')
        libvirt = container_pid('nova_libvirt')
        with open('/proc/%d/cmdline' % compute, 'rb') as f:
            self.assertIn(b'/var/lib/kolla/venv/bin/nova-compute', f.read())
        # kolla-ansible's nova_compute: its own PID namespace, the host's
        # network (127.0.0.12 is its address); nova_libvirt: the host's
        # PID namespace, so libvirt's pid files hold host pids.
        self.assertNotEqual(namespace('self', 'pid'),
                            namespace(compute, 'pid'))
        self.assertEqual(namespace('self', 'net'), namespace(compute, 'net'))
        self.assertEqual(namespace('self', 'pid'), namespace(libvirt, 'pid'))

        server = self.boot('kolla', host='nph-compute2')
        self.assert_pinned()
        name = self.get(server).instance_name
        pid = base.qemu_pid('nph-compute2', name)
        self.assertIsNotNone(pid, 'no qemu of %s in the host /proc' % name)

        # The package inside nova_compute, with nova-compute's own
        # configuration: the guest's qemu pid from libvirt is not its
        # process there, so its kernel facts are unknown, never read
        # from whatever holds that pid in the container.
        proc = subprocess.run(nova_pinning_argv() + ['status', '--format',
                                                     'json'],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(0, proc.returncode, proc.stderr)
        data = json.loads(proc.stdout)
        guest = {g['name']: g for g in data['guests']}[name]
        self.assertEqual('unknown', guest['kernel_facts'])
        self.assertIn(name, data['kernel_facts_unknown'])
        self.assert_no_compute_error()
