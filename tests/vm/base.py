"""The VM tests' common ground: one booted 2-node SMT host for the run.

Booting takes 20-70 s under TCG, so every test of a run shares one VM
(``shared()``), booted on first use with the package installed from this
checkout, and powered off when the test process exits. Tests leave it as
they found it: their guests destroyed, isolation undone, their units
stopped (``VMTestCase`` registers the clean-ups).

A VM that does not come up is one failure, of the test that booted it,
whose message is one line saying why (``machine.BootError``: the guest
kernel's words, where its vCPUs are, the host's load); every later test
is skipped with that line and the first test's name, not failed again.

Prerequisites are root, qemu-system-x86_64, qemu-img, debootstrap and
mkfs.ext4 (``tools/setup-host.sh``); without them the tests skip, or fail
with ``NPH_FUNCTIONAL_REQUIRED=1`` (CI), as the functional tests do.
"""

import atexit
import json
import os
import shutil
import time

import testtools
from testtools.content import text_content

from tests.vm import machine

CONF = '/etc/nova-pinning-hooks/nova-pinning-hooks.conf'
BASE_CONF = """[nova_pinning]
reserved_cpus = 0-1
allocation_ratio = 4.0
# Emulator and I/O threads with the vCPUs, as test_binding expects;
# test_emulator_threads.py switches to shared (the default).
emulator_threads = guest
# Long: a guest the agent pins came to it through libvirt's events.
resync_interval = 3600

[nova_pinning_isolation]
sweep_interval = 2
# A unit's answer may take many seconds in a VM starved by CI's stages
# beside it (5 s, the default, was short for status there, under a
# flood and without one).
status_timeout = 20
"""
PREFIX = 'vmt-'
# s: wait_for's bound. The VM's CPUs are qemu threads (TCG) on a host
# that may be loaded: a unit's restart or a pass takes many times what
# it takes on a quiet one.
WAIT = 180
PROBE = '/root/nph/tests/vm/probe.py'
GUEST_XML = """<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>{mib}</memory>
  <vcpu>{vcpus}</vcpu>
  <numatune><memory mode='strict' nodeset='{node}'/></numatune>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices>
</domain>"""

_VM = None
# (the id of the test that booted the VM, the one line that says why it
# did not come up): set once, so that a VM that did not boot is one
# failure, not one per test.
_BOOT_ERROR = None
# What a transient unit takes from a shipped one (``sandbox``): all of
# its [Service] settings but how it starts, restarts and stops.
_NOT_SANDBOX = frozenset(('Type', 'ExecStart', 'ExecStartPre', 'KillSignal',
                          'TimeoutStopSec', 'Restart', 'RestartSec'))


def sandbox(unit):
    """``systemd-run`` arguments (``-p KEY=VALUE`` ...) that give a
    transient unit the sandbox of the shipped ``unit`` (etc/systemd of
    this checkout): its user, capabilities, file system, system call and
    address family settings."""
    args, section = [], None
    with open(os.path.join(machine.TOP, 'etc', 'systemd', unit)) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            if line.startswith('['):
                section = line
            elif section == '[Service]' and \
                    line.split('=', 1)[0] not in _NOT_SANDBOX:
                args += ['-p', line]
    return args


class NotBooted(Exception):
    """The VM did not come up for an earlier test; this one cannot run."""


def _missing():
    if os.geteuid() != 0:
        return 'not root'
    for tool in ('qemu-system-x86_64', 'qemu-img', 'debootstrap',
                 'mkfs.ext4'):
        if shutil.which(tool) is None:
            return '%s is not installed (tools/setup-host.sh)' % tool
    return None


def shared(test_id='?'):
    """The run's VM, booted and with the package installed. The first
    caller gets the error of a boot that failed; every later one
    NotBooted, which names that first test."""
    global _VM, _BOOT_ERROR
    if _BOOT_ERROR is not None:
        raise NotBooted('the VM did not boot (counted once, as a failure '
                        'of %s): %s' % _BOOT_ERROR)
    if _VM is None:
        vm = machine.Machine()
        atexit.register(vm.destroy)
        try:
            vm.boot()
            vm.install_package()
            # libvirtd probes qemu's capabilities on its first such call
            # after boot, which under TCG can outlast the package's
            # 30 s libvirt call bound: done here, once, without it.
            vm.run(['virsh', '-q', '-c', 'qemu:///system', 'capabilities'],
                   timeout=600)
            vm.start_zygote()
            vm.run(['mkdir', '-p', os.path.dirname(CONF)])
            vm.write(CONF, BASE_CONF)
        except Exception as exc:
            _BOOT_ERROR = (test_id, str(exc).splitlines()[0] if str(exc)
                           else type(exc).__name__)
            raise
        _VM = vm
    return _VM


class VMTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        missing = _missing()
        if missing:
            if os.environ.get('NPH_FUNCTIONAL_REQUIRED') == '1':
                self.fail('VM test prerequisites missing: %s' % missing)
            self.skipTest(missing)
        try:
            self.vm = shared(self.id())
        except NotBooted as exc:
            # Not run, not passed: the one failure is the first test's.
            self.skipTest(str(exc))
        except machine.BootError as exc:
            self.addDetail('console', text_content(exc.console))
            self.fail('the VM did not boot: %s' % exc)
        self.destroy_guests()
        self.addCleanup(self.destroy_guests)

    # -- the VM ---------------------------------------------------------

    def sh(self, cmd, **kw):
        return self.vm.run(cmd, **kw)

    def np(self, *args, conf=CONF, check=True, timeout=180):
        return self.vm.run(['nova-pinning', '--config-file', conf] +
                           list(args), check=check, timeout=timeout)

    def npi(self, *args, conf=CONF, check=True):
        return self.vm.run(['nova-pinning-isolate', '--config-file', conf] +
                           list(args), check=check, timeout=180)

    def conf_with(self, path, old, new):
        """A configuration file: the base one with line ``old`` made
        ``new``."""
        self.assertIn(old + '\n', BASE_CONF)
        self.vm.write(path, BASE_CONF.replace(old + '\n', new + '\n', 1))
        self.addCleanup(self.vm.run, ['rm', '-f', path])
        return path

    # -- guests ---------------------------------------------------------

    def create_guest(self, name, vcpus, node, mib=64):
        name = PREFIX + name
        path = '/root/%s.xml' % name
        self.vm.write(path, GUEST_XML.format(name=name, vcpus=vcpus,
                                             node=node, mib=mib))
        self.vm.run(['virsh', '-q', '-c', 'qemu:///system', 'create', path],
                    timeout=180)
        return name

    def destroy_guests(self):
        self.vm.run(
            "for d in $(virsh -q -c qemu:///system list --name); do "
            "case $d in %s*) virsh -q -c qemu:///system destroy $d;; esac; "
            "done" % PREFIX, timeout=180)

    def kernel(self, *names):
        """The kernel's view of each guest (tests/vm/probe.py)."""
        return json.loads(self.vm.run(['python3', PROBE, 'guests'] +
                                      list(names)).out)

    def processes(self, *comms):
        return json.loads(self.vm.run(['python3', PROBE, 'procs'] +
                                      list(comms)).out)

    def status(self, conf=CONF):
        return json.loads(self.np('status', '--format', 'json',
                                  '--interval', '0', conf=conf).out)

    def planned(self, conf=CONF):
        """{guest name: its entry in status --format json}."""
        return {g['name']: g for g in self.status(conf)['guests']}

    def wait_for(self, what, probe, timeout=WAIT, interval=0.5):
        """Poll ``probe()`` until it returns something true; its value.
        A failure names ``what`` and the last value seen."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                self.fail('%s: not within %s s (last: %r)'
                          % (what, timeout, value))
            time.sleep(interval)
