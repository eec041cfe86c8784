"""The watch loop on a fake host, with real inotify on real pid files."""

import os
import threading
import time

import fixtures

from nova_pinning_hooks.engine import hostsettings
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.host import procfs
from nova_pinning_hooks.isolation import isolator
from nova_pinning_hooks.isolation import pidwatch
from nova_pinning_hooks.isolation import statusfile
from tests.unit.isolation import base
from tests.unit.scrape import wait_until

GROUP = '/nova-pinning-host'


class WatchTestCase(base.TestCase):
    """A fake host and ``watch`` in a thread of the test."""

    def setUp(self):
        super().setUp()
        self.run_dir = os.path.join(self.host.top, 'run')
        os.makedirs(os.path.join(self.run_dir, 'libvirt'))
        self.config(pidfile_dirs=[self.run_dir], sweep_interval=600)
        self.host.typical()

    def start(self):
        self.iso = self.isolator()
        self.stop = threading.Event()
        published = statusfile.path_for(self.state_file)
        if os.path.exists(published):
            os.unlink(published)
        thread = threading.Thread(target=self.iso.watch,
                                  args=(self.stop, 60))
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(self.stop.set)
        self.wait_for(100, GROUP)  # the initial sweep is done
        # Apply is over (its status published, its last step): the fake
        # host is not changed by two threads at once.
        end = time.monotonic() + 10
        while not os.path.exists(published) and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.2)  # the watcher is set up
        return thread

    def wait_for(self, pid, group, seconds=10.0):
        end = time.monotonic() + seconds
        while time.monotonic() < end and self.host.cgroup(pid) != group:
            time.sleep(0.05)
        self.assertEqual(group, self.host.cgroup(pid), 'pid %d' % pid)

    def pidfile(self, name, pid, rename=False):
        path = os.path.join(self.run_dir, name)
        tmp = path + '.tmp' if rename else path
        with open(tmp, 'w') as f:
            f.write('%d\n' % pid)
        if rename:
            os.rename(tmp, path)


class TestWatch(WatchTestCase):

    def test_a_daemon_that_starts_during_the_first_sweep_is_followed(self):
        original = isolator.Isolator._apply

        def apply_then_a_daemon_starts(iso):
            result = original(iso)
            # After the sweep read /proc, before it returns: too late
            # for the sweep, so only the pid-file watcher can see it.
            self.host.spawn(700, 'ntpd', start=5000)
            self.pidfile('ntpd.pid', 700)
            return result
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.isolator.Isolator._apply',
            apply_then_a_daemon_starts))
        self.start()
        self.wait_for(700, GROUP)

    def test_follows_restarted_daemons(self):
        self.start()
        self.host.exit(100)
        self.host.spawn(600, 'sshd', start=5000)
        self.pidfile('sshd.pid', 600)
        self.wait_for(600, GROUP)
        self.host.spawn(601, 'libvirtd', start=5001)
        self.pidfile('libvirt/libvirtd.pid', 601, rename=True)
        self.wait_for(601, GROUP)
        self.assertIn('601', self.iso.state['moved'])

    def test_never_moves_what_must_stay(self):
        self.start()
        for pid in (1, 2, 102, 103):
            self.pidfile('p%d.pid' % pid, pid)
        self.host.spawn(602, 'canary', start=5000)
        self.pidfile('canary.pid', 602)
        self.wait_for(602, GROUP)  # the events before it were handled
        for pid, where in ((1, '/'), (2, '/'), (102, '/'),
                           (103, '/machine/qemu-1-g1')):
            self.assertEqual(where, self.host.cgroup(pid))

    def test_pid_files_obey_only_descendants_of(self):
        self.host.spawn(300, 'trial-parent', ppid=104)
        self.config(only_descendants_of=300)
        self.host.spawn(301, 'trial-child', ppid=300)
        self.iso = self.isolator()
        stop = threading.Event()
        thread = threading.Thread(target=self.iso.watch, args=(stop, 60))
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(stop.set)
        self.wait_for(301, GROUP)
        time.sleep(0.2)
        self.host.spawn(700, 'outsider', start=5000)
        self.pidfile('outsider.pid', 700)
        self.host.spawn(302, 'trial-child-2', ppid=300, start=5001)
        self.pidfile('trial.pid', 302)
        self.wait_for(302, GROUP)
        self.assertEqual('/', self.host.cgroup(700))
        self.assertEqual('/', self.host.cgroup(100))

    def test_sweep_catches_processes_without_pid_file(self):
        self.config(sweep_interval=1)
        self.start()
        self.host.spawn(603, 'no-pidfile', start=5000)
        self.wait_for(603, GROUP)

    def test_a_pid_reused_after_the_report_is_not_moved(self):
        iso = self.isolator()
        iso.apply()
        self.host.spawn(604, 'daemon', start=5000)
        reported = procfs.read(604, self.host.paths.proc)
        self.host.spawn(604, 'someone-else', start=6000)
        self.assertFalse(iso.confine(reported))
        self.assertEqual('/', self.host.cgroup(604))

    def test_without_inotify_the_sweep_still_follows(self):
        def no_inotify(*args):
            raise OSError(24, 'Too many open files')
        self.patch(pidwatch, 'PidWatcher', no_inotify)
        self.config(sweep_interval=1)
        thread = self.start()
        self.host.spawn(606, 'restarted', start=5000)
        self.pidfile('restarted.pid', 606)
        self.wait_for(606, GROUP, seconds=5)
        self.assertTrue(thread.is_alive())

    def test_errors_do_not_stop_the_agent(self):
        # Any error of a sweep (the kernel's, the backend's, a bug's:
        # a forged D-Bus reply once raised ValueError out of the loop).
        for error in (OSError(5, 'Input/output error'),
                      ValueError("Object path ('x') must start with /")):
            self.config(sweep_interval=1)
            thread = self.start()
            calls = []
            sweep = self.iso.sweep

            def failing_once(error=error, calls=calls, sweep=sweep):
                calls.append(1)
                if len(calls) == 1:
                    raise error
                return sweep()
            self.iso.sweep = failing_once
            pid = 605 if isinstance(error, OSError) else 607
            self.host.spawn(pid, 'later', start=5000)
            self.wait_for(pid, GROUP, seconds=5)
            self.assertTrue(thread.is_alive(), error)
            self.stop.set()
            thread.join(10)

    def test_stopping_leaves_the_host_confined(self):
        thread = self.start()
        self.stop.set()
        thread.join(10)
        self.assertFalse(thread.is_alive())
        self.assertEqual(GROUP, self.host.cgroup(100))
        self.assertTrue(os.path.exists(self.state_file))


class TestWatchRechecksNovasSets(WatchTestCase):
    """Issue 40, L-1: ``watch`` checked reserved_cpus against nova's CPU
    sets once, at its start; nova-compute restarted with a shared set
    holding the reserved CPU (or its overcommit file set aside as stale)
    went unnoticed, and every sweep went on confining host processes to
    a CPU of the guests'."""

    def setUp(self):
        super().setUp()
        self.config(sweep_interval=1)
        self.oc = self.conf.nova_pinning.overcommit_file
        self.nova(shared='1-3')

    def nova(self, shared):
        overcommitfile.write(self.oc, hostsettings.HostSettings(
            4.0, '', shared_cpus=shared))

    def published(self):
        return statusfile.read(self.state_file, self.host.paths.proc)

    def test_an_overlap_that_appears_stops_the_confining(self):
        logs = self.useFixture(fixtures.FakeLogger())
        thread = self.start()
        self.nova(shared='0-3')  # nova-compute restarted with CPU 0
        # Within a sweep: one error line (before the change, none ever).
        self.assertTrue(wait_until(
            lambda: 'confining nothing more' in logs.output, 10),
            'watch went on confining: %s' % logs.output)
        # Nothing more is confined: neither by a sweep nor a pid file.
        self.host.spawn(610, 'swept', start=5000)
        self.host.spawn(611, 'restarted', start=5001)
        self.pidfile('restarted.pid', 611)
        time.sleep(2.5)  # two sweeps and more
        self.assertEqual('/', self.host.cgroup(610))
        self.assertEqual('/', self.host.cgroup(611))
        self.assertIn("reserved_cpus 0 overlaps nova's cpu_shared_set "
                      "(0-3)", self.iso.paused)
        # What was confined stays confined, and the agent lives.
        self.assertEqual(GROUP, self.host.cgroup(100))
        self.assertTrue(thread.is_alive())
        self.assertEqual(1, logs.output.count('confining nothing more'))
        self.assertTrue(wait_until(
            lambda: 'overlaps' in self.published().get('paused', '')))
        # nova's sets clear of CPU 0 again: the next sweep confines.
        self.nova(shared='1-3')
        self.wait_for(610, GROUP)
        self.assertIsNone(self.iso.paused)
        self.assertIn('confining again', logs.output)

    def test_a_file_set_aside_as_stale_stops_the_confining(self):
        logs = self.useFixture(fixtures.FakeLogger())
        self.start()
        overcommitfile.set_aside(self.oc)
        self.assertTrue(wait_until(
            lambda: 'confining nothing more' in logs.output, 10),
            'watch went on confining: %s' % logs.output)
        self.host.spawn(612, 'swept', start=5000)
        time.sleep(2.5)
        self.assertEqual('/', self.host.cgroup(612))
        self.assertIn('is stale', self.iso.paused)
        self.nova(shared='1-3')  # nova-compute wrote it (and removed it)
        self.wait_for(612, GROUP)
