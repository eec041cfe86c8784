"""nph-compute2 in kolla-ansible's containers (``tools/cloud.sh up
--compute2 kolla``; doc/source/reference/deployments.rst, "The cloud's
nph-compute2 in
kolla's containers"): the layout as the kernel shows it, and the
package's PID-namespace handling inside that real nova-compute. The
other tests of tests/cloud run against either layout; these only
against kolla's (skipped, and said so, in the host layout). The isolation
agent runs beside nova_compute in its own container, as
reference/deployments.rst
tells kolla operators, reading what nova-compute wrote in the state
directory they share."""

import json
import os
import subprocess
import time

from tests.cloud import base
from tests.cloud import kernel

PREFIX = base.KOLLA_PREFIX


def container_pid(name):
    out = subprocess.run(
        ['podman', 'container', 'inspect', '-f', '{{.State.Pid}}',
         PREFIX + name], capture_output=True, text=True, timeout=60,
        check=True).stdout
    return int(out.strip())


def kolla_compute(*args, env=None):
    """tools/kolla-compute.sh for nph-compute2, with what tools/cloud.sh
    gives it (its kolla_compute)."""
    env = dict(os.environ, NPH_KOLLA_PREFIX=PREFIX,
               NPH_KOLLA_LIBVIRT_ADDR='127.0.0.12',
               NPH_KOLLA_LIBVIRT_PORT='16522', NPH_KOLLA_NOVA_UID='0',
               **(env or {}))
    return subprocess.run(
        [os.path.join(base.TOP, 'tools', 'kolla-compute.sh')] + list(args),
        capture_output=True, text=True, timeout=600, env=env)


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
        proc = subprocess.run(base.kolla_nova_pinning_argv() + [
            'status', '--format', 'json'],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(0, proc.returncode, proc.stderr)
        data = json.loads(proc.stdout)
        guest = {g['name']: g for g in data['guests']}[name]
        self.assertEqual('unknown', guest['kernel_facts'])
        self.assertIn(name, data['kernel_facts_unknown'])
        self.assert_no_compute_error()

    def test_isolation_agent_beside_nova_compute(self):
        # nova_compute's nova-compute wrote the overcommit file into the
        # state directory both containers mount; the isolation agent's
        # container reads it there. On this machine nph-compute2's nova
        # owns every CPU (cpu_shared_set 0, cpu_dedicated_set 1), so a
        # reserved CPU for host processes overlaps nova's: the agent must
        # refuse, in one line, and move nothing. Limited to a stand-in
        # daemon (only_descendants_of) in case it did not.
        self.boot('kolla-iso', host='nph-compute2')
        daemon = subprocess.Popen(['sh', '-c', 'sleep 600 & wait'],
                                  start_new_session=True)
        self.addCleanup(daemon.wait, 10)
        self.addCleanup(os.killpg, daemon.pid, 9)
        # Its child, once the shell has started it.
        deadline = time.monotonic() + 60
        while True:
            with open('/proc/%d/task/%d/children'
                      % (daemon.pid, daemon.pid)) as f:
                children = f.read().split()
            if children:
                sleeper = int(children[0])
                break
            self.assertLess(time.monotonic(), deadline, 'no sleep started')
            time.sleep(0.1)
        every = kernel.cpus_allowed(sleeper)
        dirname = os.path.join(base.STATE, 'compute2')
        name = 'isolate-cloud.conf'
        path = os.path.join(dirname, 'etc', name)
        with open(path, 'w') as f:
            f.write('[nova_pinning]\nreserved_cpus = 0\n'
                    '[nova_pinning_isolation]\ncgroup_mode = v1\n'
                    'group_name = nph-cloud-kolla-host\n'
                    'only_descendants_of = %d\ninterrupts = false\n'
                    'workqueues = false\n' % daemon.pid)
        self.addCleanup(os.unlink, path)
        env = {'NPH_KOLLA_ISOLATE_CONF': name}
        self.addCleanup(kolla_compute, 'undo', dirname, env=env)
        proc = kolla_compute('start', dirname, 'isolate', env=env)
        self.assertEqual(0, proc.returncode, proc.stderr)
        waited = subprocess.run(
            ['podman', 'wait', PREFIX + 'pinning_isolate'],
            capture_output=True, text=True, timeout=120)
        logs = subprocess.run(
            ['podman', 'logs', PREFIX + 'pinning_isolate'],
            capture_output=True, text=True, timeout=60)
        self.assertEqual('2', waited.stdout.strip(), logs.stderr)
        self.assertEqual('', logs.stdout)
        self.assertEqual(
            ["nova-pinning-isolate: error: [nova_pinning] reserved_cpus 0 "
             "overlaps nova's cpu_shared_set (0): host processes would "
             "share CPUs with guests"], logs.stderr.splitlines())
        self.assertEqual(every, kernel.cpus_allowed(sleeper))
        self.assertFalse(os.path.exists(
            '/sys/fs/cgroup/cpuset/nph-cloud-kolla-host'))
        self.assert_no_compute_error()
