"""Host isolation on this machine's real cgroup v1 cpuset hierarchy.

Real processes ("daemons") write pid files into a directory the agent
watches. The agent is limited to this test process's descendants
(``only_descendants_of``), so the machine's own processes are never
touched, and ``undo`` always runs (cleanup), leaving no group behind.
Each daemon's Cpus_allowed_list in /proc is the proof: CPU 0 (the
reserved CPU) while confined, what it had before after undo.

Prerequisites: root, a cgroup v1 cpuset (and memory) hierarchy at
/sys/fs/cgroup, two online CPUs. Without them the tests skip, or fail
when NPH_FUNCTIONAL_REQUIRED=1.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import procfs
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import isolator
from nova_pinning_hooks.isolation import report
from nova_pinning_hooks.isolation import restore
from tests.functional import base

ROOT = '/sys/fs/cgroup'
CPUSET = ROOT + '/cpuset'
MEMORY = ROOT + '/memory'
GROUP = 'nph-func-host'
RESERVED = frozenset([0])
# s: what a wait here may take on a loaded host (a Python agent's start,
# a watcher's reaction); each returns as soon as it sees its event.
WAIT = 60


def _missing():
    if os.geteuid() != 0:
        return 'not root'
    if not os.path.exists(os.path.join(CPUSET, 'cpuset.cpus')):
        return 'no cgroup v1 cpuset hierarchy at %s' % CPUSET
    if not os.path.exists(os.path.join(MEMORY, 'memory.limit_in_bytes')):
        return 'no cgroup v1 memory hierarchy at %s' % MEMORY
    if len(config.online_cpus()) < 2:
        return 'needs 2 online CPUs to tell confined from free'
    return None


allowed = base.FunctionalTestCase.cpus_allowed  # a plain function


class IsolationTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        base.require(self, _missing())
        for root in (CPUSET, MEMORY):
            base.empty_group(root, GROUP)
        self.all_cpus = config.online_cpus()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.run_dir = os.path.join(self.tmp, 'run')
        os.makedirs(os.path.join(self.run_dir, 'sub'))
        self.state_file = os.path.join(self.tmp, 'state', 'iso.json')
        self.options = {'cgroup_mode': 'v1', 'group_name': GROUP,
                        'pidfile_dirs': self.run_dir,
                        'state_file': self.state_file,
                        'only_descendants_of': os.getpid(),
                        # This machine's interrupts and workqueues are
                        # not the tests' to change (tests/vm does).
                        'interrupts': False, 'workqueues': False,
                        # No sweep during a test unless it asks for one:
                        # restarts must be followed through pid files.
                        'sweep_interval': 600}
        self.conf = cfg.ConfigOpts()
        conf_mod.register_opts(self.conf)
        self.cf = self.useFixture(config_fixture.Config(self.conf))
        self.cf.config(group='nova_pinning', reserved_cpus='0',
                       overcommit_file=os.path.join(self.tmp, 'oc.json'))
        self.cf.config(group='nova_pinning_isolation', **dict(
            self.options, pidfile_dirs=[self.run_dir]))
        self.conf([], default_config_files=[])
        self.procs = []
        self.addCleanup(self._kill_all)
        # Registered last, so it runs first: whatever happened, the host
        # is left as it was.
        self.addCleanup(self._undo_and_check)

    def _undo_and_check(self):
        result = restore.undo(config.read(self.conf))
        self.assertEqual((), result.failures)
        for root in (CPUSET, MEMORY):
            self.assertFalse(os.path.exists(os.path.join(root, GROUP)))
        self.assertFalse(os.path.exists(self.state_file))

    def _kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()

    def daemon(self, pidfile=None, rename=False, program='sleep'):
        """A process that records its pid like a daemon: in place, or in
        a temporary file renamed over the pid file; or not at all."""
        if pidfile is None:
            proc = subprocess.Popen([program, '300'])
            self.procs.append(proc)
            return proc.pid
        path = os.path.join(self.run_dir, pidfile)
        script = ('echo $$ > "$1.tmp" && mv "$1.tmp" "$1"' if rename
                  else 'echo $$ > "$1"') + ' && exec "$2" 300'
        before = os.stat(path).st_mtime_ns if os.path.exists(path) else None
        proc = subprocess.Popen(['sh', '-c', script, 'daemon', path,
                                 program])
        self.procs.append(proc)
        # Its pid file written (a loaded host may take seconds to run sh).
        deadline = time.monotonic() + WAIT
        while not (os.path.exists(path) and
                   os.stat(path).st_mtime_ns != before):
            self.assertLess(time.monotonic(), deadline, 'no %s' % path)
            time.sleep(0.05)
        return proc.pid

    def restart(self, pidfile, rename=False):
        old = self.procs.pop(0)
        old.kill()
        old.wait()
        return self.daemon(pidfile, rename)

    def wait_allowed(self, pid, expected, seconds=None):
        seconds = WAIT if seconds is None else seconds
        end = time.monotonic() + seconds
        while allowed(pid) != expected and time.monotonic() < end:
            time.sleep(0.1)
        self.assertEqual(expected, allowed(pid), 'pid %d' % pid)

    def start_watch(self):
        """``watch`` in a thread of this process; stopped on cleanup."""
        stop = threading.Event()
        iso = isolator.Isolator(config.read(self.conf))
        watcher = threading.Thread(target=iso.watch, args=(stop, 120))
        watcher.start()
        self.addCleanup(watcher.join, 10)
        self.addCleanup(stop.set)
        time.sleep(1)  # applied, and the pid-file watcher is set up
        return stop, watcher

    def cgroup(self, pid, controller='cpuset'):
        return procfs.cgroups(pid)[controller]

    def cli(self, *args, **kw):
        cfgfile = os.path.join(self.tmp, 'nph.conf')
        with open(cfgfile, 'w') as f:
            f.write('[nova_pinning]\nreserved_cpus = 0\n'
                    'overcommit_file = %s\n[nova_pinning_isolation]\n'
                    % os.path.join(self.tmp, 'oc.json'))
            for key, value in sorted(self.options.items()):
                f.write('%s = %s\n' % (key, value))
        argv = [sys.executable, '-m', 'nova_pinning_hooks.cmd.isolate',
                '--config-file', cfgfile] + list(args)
        if kw.get('background'):
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            self.procs.append(proc)
            return proc
        return subprocess.run(argv, capture_output=True, text=True,
                              timeout=120)


class TestIsolation(IsolationTestCase):

    def test_apply_watch_restart_undo(self):
        first = self.daemon('a.pid')
        second = self.daemon('sub/b.pid')
        self.assertEqual(self.all_cpus, allowed(first))
        self.assertEqual(
            2, isolator.Isolator(config.read(self.conf)).apply())
        for pid in (first, second):
            self.wait_allowed(pid, RESERVED)
            self.assertEqual('/' + GROUP, self.cgroup(pid))

        stop, watcher = self.start_watch()
        # Restart both daemons: new pids, pid files written in place and
        # renamed over; the watcher confines the new processes.
        restarted = [self.restart('a.pid'),
                     self.restart('sub/b.pid', rename=True)]
        for pid in restarted:
            self.wait_allowed(pid, RESERVED)
        st = report.status(config.read(self.conf))
        self.assertEqual((2, 0), (st['confined'], st['not_confined']))
        stop.set()
        watcher.join(10)

        result = restore.undo(config.read(self.conf))
        self.assertEqual((2, ()), (result.restored, result.failures))
        for pid in restarted:
            self.wait_allowed(pid, self.all_cpus)
            self.assertEqual('/', self.cgroup(pid))

    def test_sweep_finds_processes_without_pid_file(self):
        self.cf.config(group='nova_pinning_isolation', sweep_interval=1)
        self.start_watch()
        quiet = self.daemon()
        self.assertEqual(self.all_cpus, allowed(quiet))
        self.wait_allowed(quiet, RESERVED)

    def test_excluded_names_stay_where_they_are(self):
        ovs = os.path.join(self.tmp, 'ovs-vswitchd')
        shutil.copy(shutil.which('sleep'), ovs)
        excluded = self.daemon('ovs.pid', program=ovs)
        plain = self.daemon('plain.pid')
        isolator.Isolator(config.read(self.conf)).apply()
        self.wait_allowed(plain, RESERVED)
        self.assertEqual(self.all_cpus, allowed(excluded))
        self.assertEqual('/', self.cgroup(excluded))

    def test_memory_limit_and_narrow_affinity_are_restored(self):
        pinned = self.daemon('pinned.pid')
        os.sched_setaffinity(pinned, {1})
        # Memory is moved only out of the listed groups: list the one
        # this test runs in (the root on a plain host).
        memory_origin = self.cgroup(pinned, 'memory')
        self.cf.config(group='nova_pinning_isolation', memory_limit_mib=512,
                       move_from_groups=sorted({'/', memory_origin}))
        isolator.Isolator(config.read(self.conf)).apply()
        self.wait_allowed(pinned, RESERVED)
        self.assertEqual('/' + GROUP, self.cgroup(pinned, 'memory'))
        with open(os.path.join(MEMORY, GROUP,
                               'memory.limit_in_bytes')) as f:
            self.assertEqual(512 * 1024 * 1024, int(f.read()))
        restore.undo(config.read(self.conf))
        self.wait_allowed(pinned, frozenset([1]))
        self.assertEqual('/', self.cgroup(pinned))
        self.assertEqual(memory_origin, self.cgroup(pinned, 'memory'))


class TestCommand(IsolationTestCase):

    def test_watch_crashes_and_undo_restores_from_the_state_file(self):
        daemon = self.daemon('d.pid')
        agent_proc = self.cli('watch', background=True)
        self.wait_allowed(daemon, RESERVED)
        time.sleep(1)
        restarted = self.restart('d.pid')
        self.wait_allowed(restarted, RESERVED)
        # The agent dies without a chance to clean up.
        agent_proc.send_signal(signal.SIGKILL)
        agent_proc.wait()
        self.assertEqual(RESERVED, allowed(restarted))  # host unchanged

        status = self.cli('status')
        self.assertEqual(0, status.returncode, status.stderr)
        self.assertIn('state: applied', status.stdout)
        self.assertIn('reserved CPUs: 0', status.stdout)
        # Not confined: the status command itself, a descendant too.
        self.assertIn('processes confined: 1, not confined: 1',
                      status.stdout)

        undo = self.cli('undo')
        self.assertEqual(0, undo.returncode, undo.stderr)
        self.assertIn('v1: 1 restored', undo.stdout)
        self.wait_allowed(restarted, self.all_cpus)
        self.assertFalse(os.path.exists(os.path.join(CPUSET, GROUP)))

    def test_a_fifo_named_like_a_pid_file_stalls_nothing(self):
        # Any local user can do this in /run/lock (world-writable, and
        # inside the default watch).
        os.mkfifo(os.path.join(self.run_dir, 'x.pid'))
        daemon = self.daemon('d.pid')  # first: restart() takes procs[0]
        agent_proc = self.cli('watch', background=True)
        self.wait_allowed(daemon, RESERVED)
        time.sleep(1)  # the watcher is up: it sees this one appear
        os.mkfifo(os.path.join(self.run_dir, 'sub', 'y.pid'))
        time.sleep(0.5)
        restarted = self.restart('d.pid')
        self.wait_allowed(restarted, RESERVED)
        agent_proc.send_signal(signal.SIGTERM)
        self.assertEqual(0, agent_proc.wait(10))

    def test_a_second_agent_is_refused(self):
        self.daemon('d.pid')
        first = self.cli('watch', background=True)
        # The first holds the agent's lock once its state is written.
        deadline = time.monotonic() + WAIT
        while not os.path.exists(self.state_file):
            self.assertLess(time.monotonic(), deadline, 'no first agent')
            time.sleep(0.1)
        second = self.cli('apply')
        self.assertEqual(1, second.returncode)
        self.assertIn('another nova-pinning-isolate', second.stderr)
        first.send_signal(signal.SIGTERM)
        self.assertEqual(0, first.wait(30))

    def test_refuses_bad_configuration_and_changes_nothing(self):
        cfgfile = os.path.join(self.tmp, 'bad.conf')
        with open(cfgfile, 'w') as f:
            f.write('[nova_pinning]\nreserved_cpus = %s\n'
                    '[nova_pinning_isolation]\ngroup_name = %s\n'
                    'state_file = %s\n'
                    % (cpuset.format(self.all_cpus), GROUP,
                       self.state_file))
        proc = subprocess.run(
            [sys.executable, '-m', 'nova_pinning_hooks.cmd.isolate',
             '--config-file', cfgfile, 'apply'],
            capture_output=True, text=True, timeout=60)
        self.assertEqual((2, ''), (proc.returncode, proc.stdout))
        self.assertEqual(['nova-pinning-isolate: error: [nova_pinning] '
                          'reserved_cpus %s is every online CPU: no CPU '
                          'would be left for guests'
                          % cpuset.format(self.all_cpus)],
                         proc.stderr.strip().splitlines())
        self.assertFalse(os.path.exists(os.path.join(CPUSET, GROUP)))
        self.assertFalse(os.path.exists(self.state_file))
