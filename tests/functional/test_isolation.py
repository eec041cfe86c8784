"""Host isolation on this machine's real cgroup v1 cpuset hierarchy.

Real processes ("daemons") write pid files into a directory the agent
watches; the agent is limited to this test's descendants
(``only_descendants_of``) so the machine's own processes stay untouched,
and ``undo`` always runs. Each daemon's Cpus_allowed_list in /proc is the
proof: {0} while confined, every CPU again after undo.
"""

import os
import subprocess
import sys
import threading
import time

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks import cpuset
from nova_pinning_hooks.isolation import agent
from tests.functional import base

CPUSET = '/sys/fs/cgroup/cpuset'
GROUP = 'nph-func-host'


class TestIsolation(testtools.TestCase):

    def setUp(self):
        super().setUp()
        missing = None
        if os.geteuid() != 0:
            missing = 'not root'
        elif not os.path.exists(os.path.join(CPUSET, 'cpuset.cpus')):
            missing = 'no cgroup v1 cpuset hierarchy at %s' % CPUSET
        elif len(agent.online_cpus()) < 2:
            missing = 'needs 2 online CPUs to tell confined from free'
        if missing:
            if os.environ.get('NPH_FUNCTIONAL_REQUIRED') == '1':
                self.fail('functional prerequisites missing: %s' % missing)
            self.skipTest(missing)
        self.all_cpus = agent.online_cpus()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.run_dir = os.path.join(self.tmp, 'run')
        os.makedirs(os.path.join(self.run_dir, 'sub'))
        self.conf = cfg.ConfigOpts()
        conf_mod.register_opts(self.conf)
        cf = self.useFixture(config_fixture.Config(self.conf))
        cf.config(group='nova_pinning', reserved_cpus='0',
                  overcommit_file=os.path.join(self.tmp, 'oc.json'))
        cf.config(group='nova_pinning_isolation', cgroup_mode='v1',
                  group_name=GROUP, pidfile_dirs=[self.run_dir],
                  state_file=os.path.join(self.tmp, 'iso.json'),
                  only_descendants_of=os.getpid(), sweep_interval=1)
        self.conf([], default_config_files=[])
        self.procs = []
        self.addCleanup(self._kill_all)
        self.iso = agent.Isolator(self.conf)
        self.addCleanup(self._undo)

    def _undo(self):
        agent.Isolator(self.conf).undo()
        self.assertFalse(os.path.exists(os.path.join(CPUSET, GROUP)))

    def _kill_all(self):
        for p in self.procs:
            p.kill()
            p.wait()

    def daemon(self, pidfile, rename=False):
        """A process that records its pid like a daemon: in place, or in
        a temporary file renamed over the pid file."""
        path = os.path.join(self.run_dir, pidfile)
        script = ('echo $$ > "$1.tmp" && mv "$1.tmp" "$1"' if rename
                  else 'echo $$ > "$1"') + ' && exec sleep 300'
        proc = subprocess.Popen(['sh', '-c', script, 'daemon', path])
        self.procs.append(proc)
        for _ in range(50):
            if os.path.exists(path):
                break
            time.sleep(0.05)
        return proc.pid

    allowed = staticmethod(base.FunctionalTestCase.cpus_allowed)

    def wait_allowed(self, pid, expected, seconds=5):
        end = time.monotonic() + seconds
        while self.allowed(pid) != expected and time.monotonic() < end:
            time.sleep(0.1)
        self.assertEqual(expected, self.allowed(pid), 'pid %d' % pid)

    def test_apply_watch_restart_undo(self):
        first = self.daemon('a.pid')
        second = self.daemon('sub/b.pid')
        self.assertEqual(self.all_cpus, self.allowed(first))
        self.assertGreaterEqual(self.iso.apply(), 2)
        self.wait_allowed(first, cpuset.parse('0'))
        self.wait_allowed(second, cpuset.parse('0'))

        stop = threading.Event()
        watcher = threading.Thread(target=self.iso.watch, args=(stop,),
                                   kwargs={'max_seconds': 60})
        watcher.start()
        self.addCleanup(watcher.join, 10)
        self.addCleanup(stop.set)
        time.sleep(0.5)
        # Restart both daemons: new pids, pid files written in place and
        # renamed over; the watcher confines the new processes.
        for p in list(self.procs):
            p.kill()
            p.wait()
        restarted = [self.daemon('a.pid'), self.daemon('sub/b.pid',
                                                       rename=True)]
        for pid in restarted:
            self.wait_allowed(pid, cpuset.parse('0'))
        stop.set()
        watcher.join(10)

        self.iso.undo()
        for pid in restarted:
            self.wait_allowed(pid, self.all_cpus)
        self.assertFalse(os.path.exists(os.path.join(CPUSET, GROUP)))

    def test_cli_refuses_bad_configuration_and_changes_nothing(self):
        cfgfile = os.path.join(self.tmp, 'bad.conf')
        with open(cfgfile, 'w') as f:
            f.write('[nova_pinning]\nreserved_cpus = 0-4095\n')
        proc = subprocess.run(
            [sys.executable, '-m',
             'nova_pinning_hooks.cmd.isolate', '--config-file', cfgfile,
             'apply'], capture_output=True, text=True, timeout=60)
        self.assertEqual(2, proc.returncode)
        self.assertIn('does not have', proc.stderr)
        self.assertEqual(1, len(proc.stderr.strip().splitlines()))
        self.assertFalse(os.path.exists(os.path.join(CPUSET,
                                                     'nova-pinning-host')))
