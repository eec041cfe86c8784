"""Functional tests: a real libvirtd, real qemu guests, pins read back from
libvirt and from the kernel (/proc).

Prerequisites: root, a libvirtd answering on qemu:///system, qemu
(``tools/setup-host.sh`` provides them). Without them the tests skip, or
fail when ``NPH_FUNCTIONAL_REQUIRED=1`` (CI), so that a broken set-up can
never pass as "skipped".
"""

import json
import os
import subprocess
import sys
import time

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import cpuset
from tests import machine

URI = 'qemu:///system'
PREFIX = 'nph-func-'
RUN_DIR = '/run/libvirt/qemu'
VIRT_TYPE_FILE = '/run/nova-pinning-hooks/virt-type'
TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))

GUEST_XML = """<domain type='{type}'>
  <name>{name}</name>
  <memory unit='MiB'>64</memory>
  <vcpu>{vcpus}</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices>
</domain>"""


def system_libvirtd_pid():
    """The pid of the libvirtd behind qemu:///system (its pid file): other
    libvirtds may run beside it (tools/cloud.sh's, a second daemon's)."""
    with open('/run/libvirtd.pid') as f:
        pid = int(f.read().strip())
    with open('/proc/%d/comm' % pid) as f:
        if f.read().strip() != 'libvirtd':
            raise AssertionError('/run/libvirtd.pid names no libvirtd')
    return pid


def _missing():
    """Why the functional tests cannot run here, or None."""
    if os.geteuid() != 0:
        return 'not root'
    try:
        import libvirt
    except ImportError:
        return 'libvirt-python is not installed'
    try:
        conn = libvirt.open(URI)
        conn.close()
    except libvirt.libvirtError as exc:
        return 'libvirtd does not answer on %s: %s' % (URI, exc)
    if not os.path.exists('/usr/bin/qemu-system-x86_64'):
        return 'qemu-system-x86_64 is not installed'
    return machine.cpus_unlike_tests()


def empty_group(root, name):
    """A cgroup v1 group ``name`` under ``root`` that a crashed earlier run
    left: its members back to ``root``, the group removed."""
    d = os.path.join(root, name)
    if not os.path.isdir(d):
        return
    with open(os.path.join(d, 'cgroup.procs')) as f:
        pids = f.read().split()
    for pid in pids:
        try:
            with open(os.path.join(root, 'cgroup.procs'), 'w') as f:
                f.write(pid)
        except ProcessLookupError:
            pass
    os.rmdir(d)


def require(test, missing):
    """Skip ``test`` for what ``missing`` says is missing, or fail it when
    ``NPH_FUNCTIONAL_REQUIRED=1`` (CI): a broken set-up never passes as
    "skipped"."""
    if missing:
        if os.environ.get('NPH_FUNCTIONAL_REQUIRED') == '1':
            test.fail('functional prerequisites missing: %s' % missing)
        test.skipTest(missing)


class FunctionalTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        require(self, _missing())
        import libvirt
        self.libvirt = libvirt
        self.conn = libvirt.open(URI)
        self.addCleanup(self.conn.close)
        self.destroy_leftovers()
        self.virt_type = self._virt_type()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.conf = cfg.ConfigOpts()
        conf_mod.register_opts(self.conf)
        self.cf = self.useFixture(config_fixture.Config(self.conf))
        # Emulator and I/O threads with the vCPUs, as these tests expect;
        # test_emulator_threads.py sets ``shared`` (the default).
        self.cf.config(group='nova_pinning', connection_uri=URI,
                       allocation_ratio=4.0, lock_path=self.tmp,
                       emulator_threads='guest',
                       overcommit_file=os.path.join(self.tmp, 'oc.json'))

    @staticmethod
    def _virt_type():
        try:
            with open(VIRT_TYPE_FILE) as f:
                return f.read().strip() or 'qemu'
        except OSError:
            return 'qemu'

    def destroy_leftovers(self):
        for dom in self.conn.listAllDomains():
            try:
                if dom.name().startswith(PREFIX) and dom.isActive():
                    dom.destroy()
            except self.libvirt.libvirtError:
                pass  # it ended between the listing and the destroy

    def boot(self, name, vcpus=1, current=None, cpuset=None):
        """Start a tiny guest (no disk; it spins in SeaBIOS); always
        destroyed at the end of the test, whatever happens. ``current``:
        vCPUs online at start (the rest can be hot-plugged); ``cpuset``:
        a ``<vcpu cpuset>``, as nova writes one from its
        ``cpu_shared_set``."""
        name = PREFIX + name
        xml = GUEST_XML.format(type=self.virt_type, name=name, vcpus=vcpus)
        if current is not None:
            xml = xml.replace('<vcpu>', "<vcpu placement='static' "
                                        "current='%d'>" % current)
        if cpuset is not None:
            xml = xml.replace('<vcpu', "<vcpu cpuset='%s'" % cpuset, 1)
        dom = self.conn.createXML(xml, 0)
        self.addCleanup(self._destroy, name)
        return dom

    def _destroy(self, name):
        try:
            self.conn.lookupByName(name).destroy()
        except self.libvirt.libvirtError:
            pass  # already gone: the test destroyed it

    # -- reading pins back ----------------------------------------------

    def pid(self, dom):
        with open(os.path.join(RUN_DIR, dom.name() + '.pid')) as f:
            return int(f.read().strip())

    def vcpu_threads(self, dom):
        """vCPU index -> thread id, from QMP query-cpus-fast."""
        import libvirt_qemu
        reply = json.loads(libvirt_qemu.qemuMonitorCommand(
            dom, '{"execute": "query-cpus-fast"}', 0))
        return {c['cpu-index']: c['thread-id'] for c in reply['return']}

    @staticmethod
    def cpus_allowed(pid, tid=None):
        path = '/proc/%d/status' % pid if tid is None else \
            '/proc/%d/task/%d/status' % (pid, tid)
        with open(path) as f:
            for line in f:
                if line.startswith('Cpus_allowed_list:'):
                    return cpuset.parse(line.split(':', 1)[1].strip())
        raise AssertionError('no Cpus_allowed_list in %s' % path)

    def kernel_pins(self, dom):
        """vCPU -> the CPUs its thread may run on, as the kernel says."""
        pid = self.pid(dom)
        return {vcpu: self.cpus_allowed(pid, tid)
                for vcpu, tid in self.vcpu_threads(dom).items()}

    def libvirt_pins(self, dom):
        """vCPU -> pinned CPUs, as libvirt's vcpuPinInfo says."""
        info = dom.vcpuPinInfo(self.libvirt.VIR_DOMAIN_AFFECT_LIVE)
        return {v: frozenset(i for i, on in enumerate(m) if on)
                for v, m in enumerate(info)}

    def assertPinned(self, dom, expected):
        """Both libvirt and the kernel agree on ``expected``."""
        self.assertEqual(expected, self.libvirt_pins(dom), 'vcpuPinInfo')
        deadline = time.monotonic() + 5
        while True:  # the cgroup write lands with the call; allow a beat
            kernel = self.kernel_pins(dom)
            if kernel == expected or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(expected, kernel, '/proc Cpus_allowed_list')

    def cli(self, *args):
        """Run ``nova-pinning`` in its own process, with this test's
        configuration written to a file."""
        return subprocess.run(
            self.cli_argv(*args), capture_output=True, text=True,
            timeout=120, cwd=TOP)

    def cli_argv(self, *args, options=()):
        """The command line of ``nova-pinning``, with this test's
        configuration written to a file: the settings every test makes,
        and ``options`` (names of other ``[nova_pinning]`` options this
        test set)."""
        path = os.path.join(self.tmp, 'nph.conf')
        group = self.conf.nova_pinning
        with open(path, 'w') as f:
            f.write('[nova_pinning]\n')
            for key in ('connection_uri', 'allocation_ratio', 'lock_path',
                        'reserved_cpus', 'overcommit_file',
                        'metrics_textfile',
                        'emulator_threads') + tuple(options):
                value = getattr(group, key)
                if value is not None:
                    f.write('%s = %s\n' % (key, value))
        return [sys.executable, '-m', 'nova_pinning_hooks.cmd.pinning',
                '--config-file', path] + list(args)
