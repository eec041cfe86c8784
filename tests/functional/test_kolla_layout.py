"""kolla-ansible's container layout, run for real with Debian's podman
(issue 32, part 3; doc/source/reference/deployments.rst, "kolla-ansible").

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

Both agents' containers run with least privilege (issue 40, M-2;
doc/source/reference/security.rst, "Least privilege"): not privileged, no
capability but CAP_SYS_NICE for the isolation agent (and CAP_DAC_OVERRIDE
on cgroup v1, this machine's) and none for the binding agent, no new
privileges, a read-only root, no network, and only
the host paths each needs (never the host's /run): the kernel's view of
their processes (/proc/<pid>/status) and podman's of their mounts are
checked, and each does its work so confined. The containerised
libvirtd's TCP socket asks for SASL credentials (issue 40, L-4): a local
user without them is refused.

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

import fixtures
import testtools

from nova_pinning_hooks.host import libvirtapi
from tests import releases
from tests.functional import base
from tests import nova_releases

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
            # The host's clients' SASL credentials (kolla-compute.sh).
            cls.auth = os.path.join(path, 'config', 'auth.conf')
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


# Capabilities by number (linux/capability.h).
DAC_OVERRIDE = 1 << 1
SYS_NICE = 1 << 23


def proc_status(pid):
    """{field: value} of /proc/<pid>/status."""
    with open('/proc/%d/status' % pid) as f:
        return dict(line.rstrip('\n').split(':\t', 1) for line in f
                    if ':\t' in line)


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
        # libvirtd asks for SASL credentials: libvirt reads them from the
        # file LIBVIRT_AUTH_FILE names, for the credential types a
        # connection offers (the package's own way to open one).
        self.useFixture(fixtures.EnvironmentVariable(
            'LIBVIRT_AUTH_FILE', self.host.auth))
        self.conn = libvirtapi.open_connection(self.host.uri)
        self.addCleanup(self.conn.close)
        self.destroy_leftovers()
        # kolla's computes run KVM guests (nova's virt_type = kvm).
        self.virt_type = 'kvm'

    def podman_exec(self, container, *argv):
        return subprocess.run(['podman', 'exec', container] + list(argv),
                              capture_output=True, text=True, timeout=300)

    def inspect(self, container):
        out = subprocess.run(['podman', 'container', 'inspect', container],
                             capture_output=True, text=True, timeout=120,
                             check=True).stdout
        return json.loads(out)[0]

    def assert_least_privilege(self, container, caps, mounts):
        """``container`` runs as reference/deployments.rst's agents must: not
        privileged, a read-only root, no network, no new privileges, no
        capability but ``caps`` (the kernel's view of its process), and
        the host paths ``mounts`` (destination: read-only) alone."""
        info = self.inspect(container)
        host_config = info['HostConfig']
        self.assertFalse(host_config['Privileged'])
        self.assertTrue(host_config['ReadonlyRootfs'])
        self.assertEqual('none', host_config['NetworkMode'])
        status = proc_status(info['State']['Pid'])
        for field in ('CapEff', 'CapPrm', 'CapBnd'):
            self.assertEqual(caps, int(status[field], 16), field)
        self.assertEqual('1', status['NoNewPrivs'])
        self.assertEqual('2', status['Seccomp'])  # podman's filter
        seen = {m['Destination']: not m['RW'] for m in info['Mounts']}
        self.assertEqual(mounts, seen)
        # Nothing of the host's /run: the container's own, empty of
        # sockets but those of the paths above.
        self.assertNotIn('/run', seen)

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
        self.assertRegex(version.stdout.strip(),
                         '^%s$' % releases.expected_version())
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
        # libvirt's socket in /run/libvirt (qemu:///system). Least
        # privilege: no capability at all, the state directory and
        # libvirt's read-only.
        proc = subprocess.run([SCRIPT, 'start', self.host.dir, 'agent'],
                              capture_output=True, text=True, timeout=600)
        self.assertEqual(0, proc.returncode, proc.stderr)
        memory = ('/sys/fs/cgroup/memory'
                  if os.path.isdir('/sys/fs/cgroup/memory')
                  else '/sys/fs/cgroup')
        self.assert_least_privilege('nph_pinning_agent', 0, {
            '/run/libvirt': True, '/var/lib/nova-pinning-hooks': True,
            '/etc/nova-pinning-hooks': True, memory: True})
        data, guest = self.status('nph_pinning_agent', dom)
        self.assertEqual('read', guest['kernel_facts'])
        self.assertNotIn(dom.name(), data['kernel_facts_unknown'])
        self.assertEqual({}, guest['kernel_drift'])
        self.assertEqual(pinned, self.kernel_pins(dom))
        # Its memory by NUMA node from its cgroup, read-only, with no
        # capability (numa_maps would need CAP_SYS_PTRACE).
        snapshot = json.loads(self.nova_pinning('nph_pinning_agent',
                                                'snapshot'))
        memory = [d.get('memory_by_node_kib') for d in snapshot['domains']
                  if '<name>%s</name>' % dom.name() in d.get('xml', '')]
        self.assertEqual(1, len(memory), snapshot['domains'])
        self.assertTrue(memory[0], memory)

        # The agent itself binds: its passes, through libvirt's socket,
        # see the guest and leave it as the policy has it.
        def agent_log():
            return subprocess.run(
                ['podman', 'logs', 'nph_pinning_agent'], capture_output=True,
                text=True, timeout=60).stderr
        end = time.monotonic() + 60
        while 'rebinding pass: 1 guests' not in agent_log() and \
                time.monotonic() < end:
            time.sleep(1)
        self.assertIn('rebinding pass: 1 guests', agent_log())
        self.assertNotIn('ERROR', agent_log())
        self.assertEqual(pinned, self.kernel_pins(dom))

    def test_libvirts_tcp_socket_asks_for_credentials(self):
        # Issue 40, L-4: libvirtd listened on loopback TCP with auth_tcp
        # "none": any local user of the machine reached it, and libvirtd
        # runs as root. Now SASL (kolla-ansible's default): a user
        # without the credentials is refused, root's clients with
        # kolla-compute.sh's auth.conf connect.
        env = {'PATH': os.environ['PATH'], 'HOME': '/nonexistent'}
        nobody = subprocess.run(
            ['setpriv', '--reuid', 'nobody', '--regid', 'nogroup',
             '--clear-groups', 'virsh', '-q', '-c', self.host.uri,
             'hostname'], capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL, env=env)
        self.assertNotEqual(0, nobody.returncode, nobody.stdout)
        self.assertIn('authentication', nobody.stderr)
        # Not even root without them.
        bare = subprocess.run(
            ['virsh', '-q', '-c', self.host.uri, 'hostname'],
            capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL, env=env)
        self.assertNotEqual(0, bare.returncode, bare.stdout)
        # With them: a SASL connection (DIGEST-MD5's security layer:
        # libvirt says encrypted).
        self.assertEqual(1, self.conn.isEncrypted())
        with open(os.path.join(self.host.dir, 'config',
                               'libvirtd.conf')) as f:
            self.assertIn('auth_tcp = "sasl"', f.read())

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

        # Least privilege: CAP_SYS_NICE, and on cgroup v1 (this
        # machine) CAP_DAC_OVERRIDE to make its group in the hierarchy's
        # root (mode 0555); what it writes (the cgroup tree, interrupts'
        # affinity, the workqueues' cpumask) it may open for writing
        # (nothing is written: this machine's interrupts are not the
        # test's), the rest is not there.
        mounts = {'/sys/fs/cgroup': False,
                  '/sys/devices/virtual/workqueue': False,
                  '/run/libvirt/qemu': True,
                  '/var/lib/nova-pinning-hooks': False,
                  '/etc/nova-pinning-hooks': True}
        if os.path.exists('/run/systemd/private'):
            mounts['/run/systemd'] = True  # systemd's own socket (issue 60)
        if os.path.exists('/run/dbus/system_bus_socket'):
            mounts['/run/dbus'] = False
        self.assert_least_privilege('nph_pinning_isolate',
                                    SYS_NICE | DAC_OVERRIDE, mounts)
        irq = sorted(n for n in os.listdir('/proc/irq') if n.isdigit())[0]
        opened = self.podman_exec(
            'nph_pinning_isolate', KOLLA_VENV_BIN + 'python3', '-c',
            'import os, sys\n'
            'for p in sys.argv[1:]:\n'
            '    os.close(os.open(p, os.O_WRONLY))\n',
            '/proc/irq/%s/smp_affinity_list' % irq,
            '/sys/devices/virtual/workqueue/cpumask',
            '/sys/fs/cgroup/cpuset/cgroup.procs')
        self.assertEqual(0, opened.returncode, opened.stderr)

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

        # Switched off as reference/deployments.rst says: the container
        # stopped, undo in
        # a one-shot container; both processes back where they were.
        undo()
        self.assertEqual(every, self.cpus_allowed(sleeper))
        self.assertEqual(every, self.cpus_allowed(daemon.pid))
        self.assertFalse(os.path.exists(
            '/sys/fs/cgroup/cpuset/' + ISOLATE_GROUP))

    def test_derived_image(self):
        # reference/deployments.rst's "A derived image": FROM kolla's
        # nova-compute (the
        # package not in it), USER root, pip install into kolla's venv
        # with kolla's constraints, USER nova.
        proc = subprocess.run([IMAGES, 'build'], capture_output=True,
                              text=True, timeout=3600)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        images = dict(line.split('=', 1)
                      for line in proc.stdout.splitlines() if '=' in line)

        # podman run needs kolla-images.sh's containers.conf where the
        # host refuses podman's default ulimits (empty elsewhere).
        env = dict(os.environ)
        if images.get('containers_conf'):
            env['CONTAINERS_CONF'] = images['containers_conf']

        def run(image, *argv):
            return subprocess.run(
                ['podman', '--runtime', images['runtime'], 'run', '--rm',
                 '--network', 'none', image] + list(argv),
                capture_output=True, text=True, timeout=300, env=env)
        derived = images['nova_compute_derived']
        version = run(derived, KOLLA_VENV_BIN + 'nova-pinning', '--version')
        self.assertEqual(0, version.returncode, version.stderr)
        self.assertRegex(version.stdout.strip(),
                         '^%s$' % releases.expected_version())
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
        # The constraints kolla's images are built with: the kolla line
        # of tools/nova-releases.
        kolla, = nova_releases.with_flag('kolla')
        with open(kolla.constraints) as f:
            self.assertIn('jeepney===' + [
                p.split('==')[1] for p in after - before
                if p.startswith('jeepney==')][0], f.read().split())


# Runs tools/kolla-images.sh in a mount namespace of its own, where
# /etc/containers is a copy (whatever the script writes there stays in
# the namespace) and, with NPH_NO_KVM set, /dev/kvm is an empty regular
# file (no KVM device: what a host without KVM has, as the script sees
# it); then lists /etc/containers as the script left it.
ISOLATED_BUILD = r"""
set -eu
mount -t tmpfs -o mode=0755 nph-etc-containers "$NPH_COPY"
cp -a /etc/containers/. "$NPH_COPY/"
mount --bind "$NPH_COPY" /etc/containers
if [ -n "${NPH_NO_KVM:-}" ]; then
    : > "$NPH_COPY/.kvm"
    mount --bind "$NPH_COPY/.kvm" /dev/kvm
fi
set +e
"$NPH_SCRIPT" build
rc=$?
ls -A /etc/containers > "$NPH_LISTING"
exit $rc
"""


class TestKollaImagesScript(testtools.TestCase):
    """tools/kolla-images.sh itself (issue 40, L-5): it used to write
    ``[containers] default_ulimits = []`` into the host's
    /etc/containers/containers.conf, for every podman user of the
    machine and for good, and without /dev/kvm it failed deep in the
    base image's build with ``groupadd: GID '0' already exists``."""

    def setUp(self):
        super().setUp()
        missing = None
        if os.geteuid() != 0:
            missing = 'not root'
        else:
            for tool in ('podman', 'debootstrap', 'unshare'):
                if shutil.which(tool) is None:
                    missing = '%s is not installed' % tool
        if missing is None and not os.path.exists('/dev/kvm'):
            missing = 'no /dev/kvm: the images are not built here'
        base.require(self, missing)

    def build(self, **env):
        top = tempfile.mkdtemp(prefix='nph-kolla-images.')
        self.addCleanup(shutil.rmtree, top, True)
        copy, listing = os.path.join(top, 'etc'), os.path.join(top, 'ls')
        os.mkdir(copy)
        proc = subprocess.run(
            ['unshare', '-m', '--propagation', 'private', 'bash', '-c',
             ISOLATED_BUILD], capture_output=True, text=True, timeout=3600,
            env=dict(os.environ, NPH_COPY=copy, NPH_SCRIPT=IMAGES,
                     NPH_LISTING=listing, **env))
        with open(listing) as f:
            return proc, sorted(f.read().split())

    def test_the_hosts_podman_configuration_is_left_alone(self):
        before = sorted(os.listdir('/etc/containers'))
        proc, after = self.build()
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        # Nothing written into /etc/containers (the namespace's copy).
        self.assertEqual(before, after, proc.stderr[-3000:])
        images = dict(line.split('=', 1)
                      for line in proc.stdout.splitlines() if '=' in line)
        self.assertIn('containers_conf', images)
        if images['containers_conf']:
            # This host refuses podman's default ulimits: the script's
            # own file, for its podman commands only.
            self.assertFalse(images['containers_conf'].startswith(
                '/etc/'), images['containers_conf'])
            with open(images['containers_conf']) as f:
                self.assertIn('default_ulimits = []', f.read())

    def test_without_kvm_one_clear_line(self):
        start = time.monotonic()
        proc, _ = self.build(NPH_NO_KVM='1')
        self.assertEqual(2, proc.returncode, proc.stderr[-3000:])
        self.assertEqual('', proc.stdout)
        lines = proc.stderr.splitlines()
        self.assertEqual(1, len(lines), proc.stderr[-3000:])
        self.assertIn('kolla-images.sh: /dev/kvm is missing', lines[0])
        # Said before anything is built or installed.
        self.assertLess(time.monotonic() - start, 60)
