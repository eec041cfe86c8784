"""kolla-ansible's container layout, run for real with Debian's podman
(issue 32, part 3; doc/source/deploy.rst, "kolla-ansible").

``tools/kolla-images.sh`` builds kolla's images once per machine (cached
by a key of their inputs) and ``tools/kolla-compute.sh`` starts them with
kolla-ansible's options: ``nova_libvirt`` (host PID and cgroup
namespaces), ``nova_compute`` (its own PID namespace) with the package in
kolla's venv, and the binding agent as a sibling container (host PID
namespace). A tiny KVM guest boots through the containerised libvirtd;
the package, run from ``nova_compute``, pins it, and the host's /proc
shows the pins; from ``nova_compute`` the guest's kernel facts are
unknown (another PID namespace), from the agent's container they are
read. The isolation agent runs in its own container too (host PID and
cgroup namespaces, kolla's image: no systemctl), limited to a stand-in
daemon this test starts (``only_descendants_of``): this machine's other
processes, interrupts and workqueues are not the test's to move; the
stand-in's Cpus_allowed_list in the host's /proc is the proof, and
``kolla-compute.sh undo`` puts it back.

Prerequisites: root, podman (``kolla-images.sh`` installs Debian's),
debootstrap, /dev/kvm, libvirt-python in the test environment. Without
them the tests skip, or fail with ``NPH_FUNCTIONAL_REQUIRED=1``.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

import testtools

from tests.functional import base

SCRIPT = os.path.join(base.TOP, 'tools', 'kolla-compute.sh')
IMAGES = os.path.join(base.TOP, 'tools', 'kolla-images.sh')
CONF = '/etc/nova-pinning-hooks/nova-pinning-hooks.conf'
# kolla_set_configs would put nova.conf here; the package's options are
# what this test gives the commands run in the containers.
KOLLA_VENV_BIN = '/var/lib/kolla/venv/bin/'


def _missing():
    if os.geteuid() != 0:
        return 'not root'
    # podman itself kolla-images.sh installs from Debian's mirror.
    for tool in ('debootstrap', 'virsh'):
        if shutil.which(tool) is None:
            return '%s is not installed' % tool
    if not os.path.exists('/dev/kvm'):
        return 'no /dev/kvm: kolla runs KVM guests'
    try:
        import libvirt  # noqa: F401
    except ImportError:
        return 'libvirt-python is not installed'
    return None


class KollaCompute:
    """One compute host in kolla's layout for the module: started on first
    use, stopped at the end of the run."""

    dir = None
    uri = None

    @classmethod
    def get(cls, test):
        if cls.uri is None:
            path = tempfile.mkdtemp(prefix='nph-kolla.')
            proc = subprocess.run([SCRIPT, 'start', path, 'compute'],
                                  capture_output=True, text=True,
                                  timeout=3600)
            if proc.returncode:
                subprocess.run([SCRIPT, 'stop', path], timeout=120)
                test.fail('kolla-compute.sh start: %s' % proc.stderr[-3000:])
            cls.dir = path
            cls.uri = proc.stdout.strip().splitlines()[-1]
            with open(os.path.join(path, 'etc',
                                   'nova-pinning-hooks.conf'), 'a') as f:
                # No nova-compute writes the overcommit file here.
                f.write('allocation_ratio = 4.0\n')
        return cls


ISOLATE_GROUP = 'nph-func-kolla-host'
ISOLATE_CONF = """[nova_pinning]
reserved_cpus = 0
[nova_pinning_isolation]
cgroup_mode = v1
group_name = %(group)s
only_descendants_of = %(pid)d
move_from_groups = %(origin)s
interrupts = false
workqueues = false
sweep_interval = 1
"""


def _cpuset_group(pid):
    with open('/proc/%d/cgroup' % pid) as f:
        for line in f:
            _, controllers, path = line.rstrip('\n').split(':', 2)
            if 'cpuset' in controllers.split(','):
                return path
    return None


def tearDownModule():
    if KollaCompute.dir is not None:
        subprocess.run([SCRIPT, 'stop', KollaCompute.dir], timeout=300)
        shutil.rmtree(KollaCompute.dir, ignore_errors=True)


class TestKollaLayout(base.FunctionalTestCase):
    """base's guests and pin readers, against the containerised libvirtd."""

    def setUp(self):
        # Not FunctionalTestCase's set-up: it needs the host's own libvirtd
        # and configures an in-process pass; here libvirt is nova_libvirt
        # and the package runs in the containers.
        testtools.TestCase.setUp(self)
        base.require(self, _missing())
        import libvirt
        self.libvirt = libvirt
        self.host = KollaCompute.get(self)
        self.conn = libvirt.open(self.host.uri)
        self.addCleanup(self.conn.close)
        self.destroy_leftovers()
        # kolla's computes run KVM guests (nova's virt_type = kvm).
        self.virt_type = 'kvm'

    def podman_exec(self, container, *argv):
        return subprocess.run(['podman', 'exec', container] + list(argv),
                              capture_output=True, text=True, timeout=300)

    def nova_pinning(self, container, *args):
        """``nova-pinning`` from kolla's venv in ``container``, as the
        container's user (nova in nova_compute, as kolla's USER nova)."""
        proc = self.podman_exec(
            container, KOLLA_VENV_BIN + 'nova-pinning',
            '--config-file', CONF, *args)
        self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
        return proc.stdout

    def pid(self, dom):
        """libvirt's pid of the guest's qemu, from its pid file in the
        containers' /run (DIR/run here); nova_libvirt shares the host's PID
        namespace, so it is the host's pid, and the host's /proc says the
        process is that guest's qemu."""
        path = os.path.join(self.host.dir, 'run', 'libvirt', 'qemu',
                            dom.name() + '.pid')
        with open(path) as f:
            pid = int(f.read().strip())
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            self.assertIn(b'guest=' + dom.name().encode(), f.read())
        return pid

    def status(self, container, dom, *connection):
        data = json.loads(self.nova_pinning(
            container, 'status', '--format', 'json', *connection))
        return data, {g['name']: g for g in data['guests']}[dom.name()]

    def test_package_in_kollas_venv(self):
        container = 'nph_nova_compute'
        version = self.podman_exec(
            container, KOLLA_VENV_BIN + 'nova-pinning', '--version')
        self.assertEqual(0, version.returncode, version.stderr)
        self.assertIn('1.0.0', version.stdout + version.stderr)
        check = self.podman_exec(container, KOLLA_VENV_BIN + 'pip', 'check')
        self.assertEqual(0, check.returncode, check.stdout + check.stderr)
        self.assertIn('No broken requirements', check.stdout)
        # kolla's venv sees Debian's python3-libvirt (venv
        # --system-site-packages, python3-libvirt in nova-base): no
        # libvirt-python of its own.
        binding = self.podman_exec(
            container, KOLLA_VENV_BIN + 'python3', '-c',
            'import libvirt; print(libvirt.__file__)')
        self.assertEqual(0, binding.returncode, binding.stderr)
        self.assertTrue(binding.stdout.startswith(
            '/usr/lib/python3/dist-packages/'), binding.stdout)
        whoami = self.podman_exec(container, 'id', '-un')
        self.assertEqual('nova', whoami.stdout.strip())

    def test_rebind_from_nova_compute_and_facts_from_the_agent(self):
        dom = self.boot('kolla', vcpus=2)
        cpus = frozenset(range(os.cpu_count()))
        self.assertEqual({0: cpus, 1: cpus}, self.kernel_pins(dom))

        # nova_compute: its own PID namespace, as kolla gives it. The
        # pass binds through libvirt; the kernel shows it.
        self.nova_pinning('nph_nova_compute', 'rebind',
                          '--connection', self.host.uri)
        pinned = self.kernel_pins(dom)
        self.assertEqual(2, len(pinned))
        for vcpu, allowed in pinned.items():
            self.assertEqual(1, len(allowed), (vcpu, pinned))
        self.assertNotEqual(pinned[0], pinned[1], 'one-to-one')
        self.assertEqual(pinned, self.libvirt_pins(dom))

        data, guest = self.status('nph_nova_compute', dom,
                                  '--connection', self.host.uri)
        self.assertEqual('unknown', guest['kernel_facts'])
        self.assertIn(dom.name(), data['kernel_facts_unknown'])

        # The binding agent's container: the host's PID namespace, so the
        # qemu's /proc is its own and its facts are read. No network:
        # libvirt's socket in /run (the configuration's qemu:///system).
        proc = subprocess.run([SCRIPT, 'start', self.host.dir, 'agent'],
                              capture_output=True, text=True, timeout=600)
        self.assertEqual(0, proc.returncode, proc.stderr)
        data, guest = self.status('nph_pinning_agent', dom)
        self.assertEqual('read', guest['kernel_facts'])
        self.assertNotIn(dom.name(), data['kernel_facts_unknown'])
        self.assertEqual({}, guest['kernel_drift'])
        self.assertEqual(pinned, self.kernel_pins(dom))

    def test_isolation_agent_in_its_container(self):
        if _cpuset_group(os.getpid()) is None:
            self.skipTest('no cgroup v1 cpuset hierarchy: the agent would '
                          'use systemd (tests/vm/test_isolation.py)')
        every = frozenset(range(os.cpu_count()))
        base.empty_group('/sys/fs/cgroup/cpuset', ISOLATE_GROUP)
        # A stand-in host daemon: sh and its sleep, in whatever cpuset
        # group this test runs in; only they are the agent's to move.
        daemon = subprocess.Popen(
            ['sh', '-c', 'sleep 600 & echo $!; wait'],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.addCleanup(daemon.wait, 10)
        self.addCleanup(os.killpg, daemon.pid, 9)
        sleeper = int(daemon.stdout.readline())
        self.assertEqual(every, self.cpus_allowed(sleeper))
        name = 'isolate.conf'
        with open(os.path.join(self.host.dir, 'etc', name), 'w') as f:
            f.write(ISOLATE_CONF % {'group': ISOLATE_GROUP,
                                    'pid': daemon.pid,
                                    'origin': _cpuset_group(daemon.pid)})
        env = dict(os.environ, NPH_KOLLA_ISOLATE_CONF=name)

        def undo():
            proc = subprocess.run([SCRIPT, 'undo', self.host.dir],
                                  capture_output=True, text=True,
                                  timeout=300, env=env)
            self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
            return proc
        self.addCleanup(undo)  # whatever happens, put the host back
        proc = subprocess.run([SCRIPT, 'start', self.host.dir, 'isolate'],
                              capture_output=True, text=True, timeout=600,
                              env=env)
        self.assertEqual(0, proc.returncode, proc.stderr)

        # The agent in kolla's image, through the host's cgroup tree:
        # the stand-in confined to the reserved CPU.
        end = time.monotonic() + 60
        while (self.cpus_allowed(sleeper) != {0}
               and time.monotonic() < end):
            time.sleep(0.5)
        logs = subprocess.run(['podman', 'logs', 'nph_pinning_isolate'],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(frozenset([0]), self.cpus_allowed(sleeper),
                         logs.stdout + logs.stderr)
        # Its descendants only: sh itself is not one.
        self.assertEqual(every, self.cpus_allowed(daemon.pid))
        self.assertEqual(
            '/' + ISOLATE_GROUP, _cpuset_group(sleeper))
        status = self.podman_exec(
            'nph_pinning_isolate', KOLLA_VENV_BIN + 'nova-pinning-isolate',
            '--config-file', '/etc/nova-pinning-hooks/' + name, 'status')
        self.assertEqual(0, status.returncode, status.stderr)
        self.assertIn('applied: v1 on CPUs 0,', status.stdout)

        # Switched off as deploy.rst says: the container stopped, undo in
        # a one-shot container; both processes back where they were.
        undo()
        self.assertEqual(every, self.cpus_allowed(sleeper))
        self.assertEqual(every, self.cpus_allowed(daemon.pid))
        self.assertFalse(os.path.exists(
            '/sys/fs/cgroup/cpuset/' + ISOLATE_GROUP))

    def test_derived_image(self):
        # deploy.rst's "A derived image": FROM kolla's nova-compute (the
        # package not in it), USER root, pip install into kolla's venv
        # with kolla's constraints, USER nova.
        proc = subprocess.run([IMAGES, 'build'], capture_output=True,
                              text=True, timeout=3600)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        images = dict(line.split('=', 1)
                      for line in proc.stdout.splitlines() if '=' in line)

        def run(image, *argv):
            return subprocess.run(
                ['podman', '--runtime', images['runtime'], 'run', '--rm',
                 '--network', 'none', image] + list(argv),
                capture_output=True, text=True, timeout=300)
        derived = images['nova_compute_derived']
        version = run(derived, KOLLA_VENV_BIN + 'nova-pinning', '--version')
        self.assertEqual(0, version.returncode, version.stderr)
        self.assertIn('1.0.0', version.stdout + version.stderr)
        check = run(derived, KOLLA_VENV_BIN + 'pip', 'check')
        self.assertIn('No broken requirements', check.stdout, check.stderr)
        binding = run(derived, KOLLA_VENV_BIN + 'python3', '-c',
                      'import libvirt; print(libvirt.__file__)')
        self.assertTrue(binding.stdout.startswith(
            '/usr/lib/python3/dist-packages/'), binding.stdout)
        self.assertEqual('nova', run(derived, 'id', '-un').stdout.strip())
        # The image it derives from has no package: the RUN put it there,
        # and changed nothing else in kolla's venv but adding jeepney at
        # the constraints' version.
        parent = images['nova_compute_kolla']
        self.assertNotEqual(0, run(parent, KOLLA_VENV_BIN + 'nova-pinning',
                                   '--version').returncode)
        before, after = (
            set(run(image, KOLLA_VENV_BIN + 'pip',
                    'freeze').stdout.splitlines())
            for image in (parent, derived))
        self.assertEqual(set(), before - after)
        added = sorted(p.split('==')[0].split(' @ ')[0]
                       for p in after - before)
        self.assertEqual(['jeepney', 'nova-pinning-hooks'], added)
        with open(os.path.join(base.TOP, 'tools', 'constraints',
                               'nova-34.txt')) as f:
            self.assertIn('jeepney===' + [
                p.split('==')[1] for p in after - before
                if p.startswith('jeepney==')][0], f.read().split())
