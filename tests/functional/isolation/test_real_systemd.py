"""The systemd path against a real systemd (252, Debian 12), booted as pid
1 of a container with systemd-nspawn from a Debian root file system
(``tools/systemd-rootfs.sh``), the package bind-mounted read-only and run
with the container's own python3.

What these machines allow, and so what these tests prove: the host's
cpuset controller is bound to its cgroup v1 hierarchy (libvirt uses it),
and a controller lives in one hierarchy only, so the container's unified
cgroup v2 hierarchy has no cpuset controller (``cgroup.controllers`` is
empty; ``echo +cpuset > cgroup.subtree_control`` fails). systemd then
accepts ``set-property AllowedCPUs=0`` with exit status 0 and applies
nothing (``EffectiveCPUs=`` stays empty, daemons keep every CPU). So:

* the real systemctl's output is read and written correctly (record,
  set, show, restore round trip);
* ``nova-pinning-isolate apply`` refuses, with exit status 2 and one
  line, to report a confinement that systemd did not make, and changes
  nothing; ``status`` and ``undo`` work;
* confinement itself, ``watch`` across a daemon restart and its undo
  cannot be shown here (see doc/source/reference/isolation-design.rst).
"""

import os
import signal
import subprocess
import time

import testtools

from tests.functional import base

TOP = base.TOP
NSPAWN = '/usr/bin/systemd-nspawn'
UNITS = ('system.slice', 'user.slice', 'init.scope')


def _missing():
    if os.geteuid() != 0:
        return 'not root'
    if not os.access(NSPAWN, os.X_OK):
        return 'systemd-nspawn is missing (tools/setup-host.sh installs it)'
    return None


class Container:
    """A booted systemd container; ``run`` executes inside it."""

    def __init__(self, rootfs, unified, name):
        env = dict(os.environ)
        if unified:
            env['SYSTEMD_NSPAWN_UNIFIED_HIERARCHY'] = '1'
        self.proc = subprocess.Popen(
            [NSPAWN, '-D', rootfs, '--boot', '--register=no',
             '--keep-unit', '--volatile=overlay', '-M', name,
             '--bind-ro=%s:/src' % os.path.abspath(TOP)],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.pid = None
        state = ''
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError('systemd-nspawn exited %d'
                                     % self.proc.returncode)
            # nspawn's child becomes systemd only once it has exec'd.
            self.pid = self._systemd_child()
            if self.pid is not None:
                state = self.run('systemctl', 'is-system-running', '--wait',
                                 timeout=90).stdout.strip()
                if state in ('running', 'degraded'):
                    return
            time.sleep(0.2)
        raise AssertionError('container systemd is %r' % state)

    def _systemd_child(self):
        children = subprocess.run(
            ['pgrep', '-P', str(self.proc.pid)], capture_output=True,
            text=True, check=False).stdout.split()
        for pid in children:
            try:
                with open('/proc/%s/comm' % pid) as f:
                    if f.read().strip() == 'systemd':
                        return int(pid)
            except OSError:
                continue
        return None

    def run(self, *argv, stdin=None, timeout=60):
        return subprocess.run(
            ['nsenter', '-t', str(self.pid), '-a', '--'] + list(argv),
            input=stdin, capture_output=True, text=True, timeout=timeout,
            check=False)

    def python(self, *argv, **kw):
        return self.run('env', 'PYTHONPATH=/src', 'python3', *argv, **kw)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # a clean poweroff
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class RealSystemdTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        base.require(self, _missing())
        build = subprocess.run([os.path.join(TOP, 'tools',
                                             'systemd-rootfs.sh')],
                               capture_output=True, text=True, timeout=1200,
                               check=False)
        self.assertEqual(0, build.returncode, build.stderr[-2000:])
        self.rootfs = build.stdout.strip().splitlines()[-1]

    def boot(self, unified):
        c = Container(self.rootfs, unified, 'nph-%d' % os.getpid())
        self.addCleanup(c.stop)
        return c

    def isolate(self, c, command, mode='auto'):
        c.run('sh', '-c', 'cat > /run/nph.conf', stdin=(
            '[nova_pinning]\nreserved_cpus = 0\n'
            '[nova_pinning_isolation]\ncgroup_mode = %s\n'
            # The machine's interrupts are not this test's (tests/vm).
            'interrupts = false\nworkqueues = false\n'
            'state_file = /run/nph/isolation.json\n' % mode))
        return c.python('-m', 'nova_pinning_hooks.cmd.isolate',
                        '--config-file', '/run/nph.conf', *command.split())

    def allowed_cpus(self, c, unit):
        out = c.run('systemctl', 'show', '-p', 'AllowedCPUs', '-p',
                    'EffectiveCPUs', unit).stdout
        return dict(line.split('=', 1) for line in out.splitlines())


class TestRealSystemd(RealSystemdTestCase):

    def test_unified_hierarchy_without_the_cpuset_controller(self):
        c = self.boot(unified=True)
        self.assertEqual('cgroup2fs', c.run(
            'stat', '-fc', '%T', '/sys/fs/cgroup').stdout.strip())
        self.assertEqual('', c.run(
            'cat', '/sys/fs/cgroup/cgroup.controllers').stdout.strip())
        enable = c.run('sh', '-c',
                       'echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control')
        self.assertNotEqual(0, enable.returncode)
        # What systemd itself does: takes the property, applies nothing.
        raw = c.run('systemctl', 'set-property', '--runtime',
                    'system.slice', 'AllowedCPUs=0')
        self.assertEqual(0, raw.returncode, raw.stderr)
        self.assertEqual({'AllowedCPUs': '0', 'EffectiveCPUs': ''},
                         self.allowed_cpus(c, 'system.slice'))
        dbus = c.run('systemctl', 'show', '-p', 'MainPID', '--value',
                     'dbus.service').stdout.strip()
        status = c.run('grep', 'Cpus_allowed_list',
                       '/proc/%s/status' % dbus).stdout
        self.assertNotIn('\t0\n', status)  # not confined to CPU 0
        c.run('systemctl', 'set-property', '--runtime', 'system.slice',
              'AllowedCPUs=')

        # The package refuses to claim what systemd cannot do.
        apply = self.isolate(c, 'apply')
        self.assertEqual((2, ''), (apply.returncode, apply.stdout),
                         apply.stderr)
        self.assertEqual(['nova-pinning-isolate: error: cgroup_mode '
                          'systemd: the cpuset controller is not available '
                          'in the cgroup v2 hierarchy at /sys/fs/cgroup (it '
                          'is bound to a cgroup v1 hierarchy, or disabled): '
                          'AllowedCPUs= would confine nothing'],
                         apply.stderr.strip().splitlines())
        for unit in UNITS:
            self.assertEqual('', self.allowed_cpus(c, unit)['AllowedCPUs'])
        undo = self.isolate(c, 'undo')
        self.assertEqual((0, 'nothing to undo\n'),
                         (undo.returncode, undo.stdout), undo.stderr)

    def test_the_real_systemctl_round_trip(self):
        c = self.boot(unified=True)
        code = (
            'from nova_pinning_hooks.isolation import systemd, BackendError\n'
            'units = ["system.slice", "user.slice", "init.scope"]\n'
            'b = systemd.Systemd(units, cpus=frozenset([0]),\n'
            '                    systemctl="/usr/bin/systemctl")\n'
            'record = b.record()\n'
            'print("recorded", sorted(record["previous"].items()))\n'
            'try:\n'
            '    b.ensure()\n'
            'except BackendError as exc:\n'
            '    print("ensure:", exc)\n'
            'print("set", b.show("system.slice")["AllowedCPUs"])\n'
            'print("drifted", b.drifted())\n'
            'print("failed", b.restore(record))\n'
            'print("restored", repr(b.show("system.slice")["AllowedCPUs"]))\n')
        out = c.python('-c', code)
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertEqual([
            "recorded [('init.scope', {'AllowedCPUs': ''}), ('system.slice',"
            " {'AllowedCPUs': ''}), ('user.slice', {'AllowedCPUs': ''})]",
            "ensure: system.slice: systemd accepted AllowedCPUs=0 but its "
            "EffectiveCPUs are '': not confined",
            'set 0',
            "drifted ['user.slice', 'init.scope']",
            'failed []',
            "restored ''"], out.stdout.strip().splitlines())

    def test_legacy_or_hybrid_hierarchy(self):
        c = self.boot(unified=False)
        self.assertEqual('tmpfs', c.run(
            'stat', '-fc', '%T', '/sys/fs/cgroup').stdout.strip())
        apply = self.isolate(c, 'apply', mode='systemd')
        self.assertEqual((2, ''), (apply.returncode, apply.stdout),
                         apply.stderr)
        self.assertIn('is not a unified cgroup v2 hierarchy',
                      apply.stderr)
        self.assertEqual(1, len(apply.stderr.strip().splitlines()))
