"""The privilege boundary and time bounds, on the real kernel and libvirtd.

An unprivileged user (``nobody``, through ``setpriv``) owns a state
directory, as the nova user does on a compute node, and races symlink
swaps against root's writes; root and that user take the pass lock in
turn; everything is made under umask 000; libvirtd is stopped
(SIGSTOP) mid-pass; a vCPU's cgroup is changed behind libvirt's back.
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import testtools

from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.passes import passlock
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from tests.functional import base

NOBODY = 65534
TOP = base.TOP
SYSTEM_PYTHON = '/usr/bin/python3'


def _missing():
    if os.geteuid() != 0:
        return 'not root'
    if subprocess.run(['setpriv', '--version'], capture_output=True,
                      check=False).returncode:
        return 'setpriv (util-linux) is missing'
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return '%s is missing' % SYSTEM_PYTHON
    return None


def as_nobody(code, *args, src, background=False, timeout=60):
    """Run Python ``code`` as nobody:nogroup with no supplementary
    groups, with the system's python3 and a copy of this package in
    ``src`` (the checkout and its virtualenvs may be closed to others;
    the modules run here need only the standard library)."""
    argv = ['setpriv', '--reuid=%d' % NOBODY, '--regid=%d' % NOBODY,
            '--clear-groups', SYSTEM_PYTHON, '-c', code] + list(args)
    env = dict(os.environ, PYTHONPATH=src)
    if background:
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    return subprocess.run(argv, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


ATTACKER = r'''
import os, sys, time
d, victim, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
end = time.monotonic() + seconds
swaps = 0
while time.monotonic() < end:
    for name in os.listdir(d):
        # Any temporary file root may create: swap it for a link.
        if name.startswith('.') and not os.path.islink(os.path.join(d, name)):
            try:
                os.unlink(os.path.join(d, name))
                os.symlink(victim, os.path.join(d, name))
                swaps += 1
            except OSError:
                pass
print(swaps)
'''


class SecurityTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        base.require(self, _missing())
        # A tree nobody can traverse (a TempDir is 0700).
        self.top = tempfile.mkdtemp(prefix='nph-sec-')
        self.addCleanup(subprocess.run, ['rm', '-rf', self.top])
        os.chmod(self.top, 0o755)
        self.victim = os.path.join(self.top, 'victim')
        with open(self.victim, 'w') as f:
            f.write('root only\n')
        os.chmod(self.victim, 0o644)
        self.src = os.path.join(self.top, 'src')
        shutil.copytree(os.path.join(TOP, 'nova_pinning_hooks'),
                        os.path.join(self.src, 'nova_pinning_hooks'))
        subprocess.run(['chmod', '-R', 'a+rX', self.src], check=True)

    def nobody_dir(self, name):
        d = os.path.join(self.top, name)
        os.mkdir(d, 0o755)
        os.chown(d, NOBODY, NOBODY)
        return d


class TestPrivilegeBoundary(SecurityTestCase):

    def test_root_never_writes_into_a_directory_nobody_controls(self):
        d = self.nobody_dir('state')
        attacker = as_nobody(ATTACKER, d, self.victim, '6', src=self.src,
                             background=True)
        self.addCleanup(attacker.kill)
        refused = 0
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                statefile.write_json(os.path.join(d, 'oc.json'),
                                     {'version': 1}, mode=0o600)
            except safefs.UnsafeFileError as exc:
                self.assertIn('writable by a user other than root',
                              str(exc))
                refused += 1
        out, err = attacker.communicate(timeout=30)
        self.assertEqual(0, attacker.returncode, err)
        self.assertGreater(refused, 10)
        # Root changed nothing the attacker could point it at.
        self.assertEqual(0o644, stat.S_IMODE(os.stat(self.victim).st_mode))
        with open(self.victim) as f:
            self.assertEqual('root only\n', f.read())
        self.assertEqual([], [n for n in os.listdir(d)
                              if not os.path.islink(os.path.join(d, n))])

    def test_a_link_planted_in_the_lock_directory_is_never_followed(self):
        d = self.nobody_dir('lock')
        rootonly = os.path.join(self.top, 'rootonly')
        os.mkdir(rootonly, 0o700)
        for name in ('nova-pinning-hooks-pass', 'lock', '.lock'):
            os.symlink(os.path.join(rootonly, name),
                       os.path.join(d, name))
        with passlock.PassLock(d, 5):
            pass
        self.assertEqual([], os.listdir(rootonly))
        shutil.rmtree(d)
        os.symlink(rootonly, d)  # the directory itself a link
        self.assertRaises(safefs.UnsafeFileError,
                          passlock.PassLock(d, 1).acquire)

    def test_root_and_the_nova_user_take_the_pass_lock_in_turn(self):
        lock_dir = os.path.join(self.top, 'lock')  # made by root's pass
        take = ('import sys; from nova_pinning_hooks.passes import passlock\n'
                'with passlock.PassLock(sys.argv[1], 10): pass\n'
                'print("ok")')
        for _ in range(3):
            with passlock.PassLock(lock_dir, 10):
                pass
            proc = as_nobody(take, lock_dir, src=self.src)
            self.assertEqual(('ok', ''), (proc.stdout.strip(),
                                          proc.stderr.strip()))
        self.assertEqual([], os.listdir(lock_dir))

    def test_the_nova_user_waits_for_roots_pass_and_vice_versa(self):
        lock_dir = os.path.join(self.top, 'lock')
        hold = ('import sys, time\n'
                'from nova_pinning_hooks.passes import passlock\n'
                'l = passlock.PassLock(sys.argv[1], 10).acquire()\n'
                'print("held", flush=True); time.sleep(5)\n')
        os.mkdir(lock_dir, 0o755)
        holder = as_nobody(hold, lock_dir, src=self.src, background=True)
        self.assertEqual('held', holder.stdout.readline().strip())
        start = time.monotonic()
        with passlock.PassLock(lock_dir, 10):
            waited = time.monotonic() - start
        holder.wait(10)
        # The holder keeps it 5 s after saying so; however late this
        # process started its clock on a loaded machine, a lock that did
        # not wait would have taken milliseconds.
        self.assertGreater(waited, 1.0)

    def test_modes_do_not_depend_on_the_umask(self):
        code = ('import os, sys\n'
                'os.umask(0)\n'
                'from nova_pinning_hooks.host import statefile\n'
                'from nova_pinning_hooks.passes import passlock\n'
                'from nova_pinning_hooks.isolation import state\n'
                'top = sys.argv[1]\n'
                'with passlock.PassLock(top + "/lock/dir", 1): pass\n'
                'statefile.write_json(top + "/oc/new/oc.json", {})\n'
                'with state.Lock(top + "/iso/state.json"):\n'
                '    state.save(top + "/iso/state.json", {})\n')
        proc = subprocess.run([sys.executable, '-c', code, self.top],
                              env=dict(os.environ, PYTHONPATH=TOP),
                              capture_output=True, text=True, timeout=60,
                              check=False)
        self.assertEqual(0, proc.returncode, proc.stderr)
        found = {}
        for root, dirs, files in os.walk(self.top):
            if root == self.top:
                dirs.remove('src')
            for name in dirs + files:
                path = os.path.join(root, name)
                found[os.path.relpath(path, self.top)] = stat.S_IMODE(
                    os.lstat(path).st_mode)
        self.assertEqual({'victim': 0o644, 'lock': 0o755,
                          'lock/dir': 0o755, 'oc': 0o755, 'oc/new': 0o755,
                          'oc/new/oc.json': 0o644, 'iso': 0o755,
                          'iso/state.json': 0o600,
                          'iso/state.json.lock': 0o600}, found)


class TestHungLibvirtd(base.FunctionalTestCase):
    """libvirtd stopped with SIGSTOP: it accepts connections, answers
    nothing."""

    def libvirtd_pid(self):
        return base.system_libvirtd_pid()

    def test_a_pass_ends_with_an_error_and_frees_the_lock(self):
        self.boot('a')
        pid = self.libvirtd_pid()
        self.cf.config(group='nova_pinning', libvirt_call_timeout=2,
                       pass_timeout=6, lock_timeout=0)
        os.kill(pid, signal.SIGSTOP)
        self.addCleanup(os.kill, pid, signal.SIGCONT)
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        start = time.monotonic()
        result = rec.run_pass()
        took = time.monotonic() - start
        self.assertEqual('failed', result.error_kind)
        self.assertIn('did not return within', result.error)
        # The daemon answers nothing for the rest of the test: any bound
        # shows the pass did not wait for it (2 s calls, a 6 s pass here).
        self.assertLess(took, 30)
        # The lock is free at once (lock_timeout 0) although the daemon
        # still answers nothing; so is the CLI's exit status 1.
        with passlock.PassLock(self.conf.nova_pinning.lock_path, 0):
            pass
        self.cf.config(group='nova_pinning', libvirt_call_timeout=2)
        proc = self.cli_with('rebind', libvirt_call_timeout=2)
        self.assertEqual((1, ''), (proc.returncode, proc.stdout))
        self.assertEqual(1, len(proc.stderr.strip().splitlines()),
                         proc.stderr)
        self.assertIn('did not return within 2 s', proc.stderr)
        os.kill(pid, signal.SIGCONT)
        # The same reconciler recovers on a new connection.
        deadline = time.monotonic() + 30
        while True:
            again = rec.run_pass()
            if again.error is None or time.monotonic() > deadline:
                break
            time.sleep(1)
        rec.close()
        self.assertIsNone(again.error)

    def cli_with(self, *args, **options):
        path = os.path.join(self.tmp, 'nph.conf')
        group = self.conf.nova_pinning
        with open(path, 'w') as f:
            f.write('[nova_pinning]\n')
            for key in ('connection_uri', 'allocation_ratio', 'lock_path',
                        'overcommit_file'):
                f.write('%s = %s\n' % (key, getattr(group, key)))
            for key, value in options.items():
                f.write('%s = %s\n' % (key, value))
        return subprocess.run(
            [sys.executable, '-m', 'nova_pinning_hooks.cmd.pinning',
             '--config-file', path] + list(args),
            capture_output=True, text=True, timeout=120, cwd=TOP)


class TestKernelDrift(base.FunctionalTestCase):
    """A vCPU thread's cgroup cpuset changed outside libvirt."""

    def vcpu_cgroup(self, dom, vcpu):
        tid = self.vcpu_threads(dom)[vcpu]
        with open('/proc/%d/task/%d/cgroup' % (self.pid(dom), tid)) as f:
            for line in f:
                _, controllers, path = line.rstrip('\n').split(':', 2)
                if 'cpuset' in controllers.split(','):
                    return '/sys/fs/cgroup/cpuset' + path
        self.fail('no cpuset cgroup for vCPU %d' % vcpu)

    def test_status_sees_it_and_a_pass_repairs_it(self):
        a = self.boot('a', vcpus=1)
        proc = self.cli('rebind')
        self.assertEqual(0, proc.returncode, proc.stderr)
        pinned = self.libvirt_pins(a)
        self.assertPinned(a, pinned)
        # Moved to the CPUs it is not pinned to (another guest's, on a
        # full host). (Widening its cpuset would not move it: the kernel
        # keeps the affinity libvirt asked for within the cpuset.)
        elsewhere = frozenset(range(os.cpu_count())) - pinned[0]
        self.assertTrue(elsewhere)
        with open(os.path.join(self.vcpu_cgroup(a, 0), 'cpuset.cpus'),
                  'w') as f:
            f.write(','.join(map(str, sorted(elsewhere))))
        self.assertEqual(elsewhere, self.kernel_pins(a)[0])
        self.assertEqual(pinned, self.libvirt_pins(a))  # libvirt unaware

        proc = self.cli('status', '--format', 'json')
        self.assertEqual(0, proc.returncode, proc.stderr)
        guest = {g['name']: g for g in json.loads(proc.stdout)['guests']}[
            a.name()]
        self.assertEqual(['0'], list(guest['kernel_drift']))
        self.assertFalse(guest['live_matches_plan'])

        proc = self.cli('rebind')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertIn('1 changes, 1 applied', proc.stdout)
        self.assertPinned(a, pinned)
        proc = self.cli('rebind')
        self.assertIn('0 changes', proc.stdout)
