"""Real inotify on real pid files of real processes in a temporary
directory: written in place, renamed over, deleted, in subdirectories,
and pid reuse."""

import os
import subprocess
import time

import fixtures
import testtools

from nova_pinning_hooks.isolation import pidwatch


class TestPidWatcher(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.run_dir = self.useFixture(fixtures.TempDir()).path
        self.watcher = pidwatch.PidWatcher([self.run_dir])
        self.addCleanup(self.watcher.close)

    def daemon(self):
        proc = subprocess.Popen(['sleep', '60'])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc.pid

    def write(self, name, text):
        path = os.path.join(self.run_dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def collect(self, seconds=2.0):
        """pids reported within ``seconds`` (stops at the first batch)."""
        found, end = [], time.monotonic() + seconds
        while time.monotonic() < end and not found:
            found = [p.pid for p in self.watcher.wait(0.1)]
        return found

    def test_written_in_place(self):
        pid = self.daemon()
        self.write('d.pid', '%d\n' % pid)
        self.assertEqual([pid], self.collect())

    def test_renamed_over(self):
        first, second = self.daemon(), self.daemon()
        self.write('d.pid', '%d\n' % first)
        self.assertEqual([first], self.collect())
        tmp = self.write('.d.pid.tmp', '%d\n' % second)
        self.assertEqual([], self.collect(0.3))  # not a .pid file
        os.rename(tmp, os.path.join(self.run_dir, 'd.pid'))
        self.assertEqual([second], self.collect())

    def test_same_process_rewritten_is_reported_once(self):
        pid = self.daemon()
        self.write('d.pid', '%d\n' % pid)
        self.assertEqual([pid], self.collect())
        self.write('d.pid', '%d\n' % pid)
        self.assertEqual([], self.collect(0.5))

    def test_deleted_is_forgotten(self):
        pid = self.daemon()
        path = self.write('d.pid', '%d\n' % pid)
        self.collect()
        self.assertIn(path, self.watcher.files)
        os.unlink(path)
        self.assertEqual([], self.collect(0.5))
        self.assertNotIn(path, self.watcher.files)
        # Written again after the delete: the daemon came back.
        self.write('d.pid', '%d\n' % pid)
        self.assertEqual([pid], self.collect())

    def test_subdirectory_present_at_start(self):
        self.watcher.close()
        os.mkdir(os.path.join(self.run_dir, 'libvirt'))
        self.watcher = pidwatch.PidWatcher([self.run_dir])
        pid = self.daemon()
        self.write('libvirt/libvirtd.pid', '%d\n' % pid)
        self.assertEqual([pid], self.collect())

    def test_subdirectory_made_later(self):
        os.mkdir(os.path.join(self.run_dir, 'daemon'))
        self.watcher.wait(0.2)
        pid = self.daemon()
        self.write('daemon/daemon.pid', '%d\n' % pid)
        self.assertEqual([pid], self.collect())

    def test_subdirectory_renamed_in_with_a_pid_file(self):
        # mkdir + write happen before the watch exists: found by a scan.
        outside = self.useFixture(fixtures.TempDir()).path
        pid = self.daemon()
        with open(os.path.join(outside, 'x.pid'), 'w') as f:
            f.write('%d\n' % pid)
        os.rename(outside, os.path.join(self.run_dir, 'x'))
        self.assertEqual([pid], self.collect())

    def test_only_one_level_down(self):
        os.makedirs(os.path.join(self.run_dir, 'a'))
        self.watcher.wait(0.2)
        os.makedirs(os.path.join(self.run_dir, 'a', 'b'))
        self.watcher.wait(0.2)
        self.write('a/b/deep.pid', '%d\n' % self.daemon())
        self.assertEqual([], self.collect(0.5))

    def test_a_directory_and_a_symlink_to_it_are_watched_once(self):
        link = os.path.join(self.useFixture(fixtures.TempDir()).path, 'run')
        os.symlink(self.run_dir, link)
        self.watcher.close()
        self.watcher = pidwatch.PidWatcher([self.run_dir, link])
        self.assertEqual(1, len(self.watcher.dirs))
        pid = self.daemon()
        self.write('d.pid', '%d\n' % pid)
        self.assertEqual([pid], self.collect())

    def test_junk_and_init_are_ignored(self):
        for name, text in (('a.pid', 'not a pid\n'), ('b.pid', '1\n'),
                           ('c.pid', ''), ('d.pid', '-5\n')):
            self.write(name, text)
        self.assertEqual([], self.collect(0.5))

    def test_extra_lines_after_the_pid(self):
        pid = self.daemon()
        self.write('d.pid', '%d\nport 5900\n' % pid)
        self.assertEqual([pid], self.collect())

    def test_missing_directories_are_skipped(self):
        watcher = pidwatch.PidWatcher([os.path.join(self.run_dir, 'no')])
        self.addCleanup(watcher.close)
        self.assertEqual({}, watcher.dirs)


class TestPidReuse(testtools.TestCase):
    """A pid file names a process only if that process started before
    the file was written."""

    def setUp(self):
        super().setUp()
        self.run_dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.run_dir, 'old.pid')

    def test_file_older_than_the_process_is_stale(self):
        proc = subprocess.Popen(['sleep', '60'])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        with open(self.path, 'w') as f:
            f.write('%d\n' % proc.pid)
        self.assertEqual(proc.pid,
                         pidwatch.identity_of_file(self.path).pid)
        # As if the file had been left by a daemon that died an hour ago
        # and its pid had gone to this younger process.
        an_hour_ago = time.time() - 3600
        os.utime(self.path, (an_hour_ago, an_hour_ago))
        self.assertIsNone(pidwatch.identity_of_file(self.path))

    def test_dead_process(self):
        proc = subprocess.Popen(['true'])
        proc.wait()
        with open(self.path, 'w') as f:
            f.write('%d\n' % proc.pid)
        self.assertIsNone(pidwatch.identity_of_file(self.path))

    def test_identity_carries_the_start_time(self):
        proc = subprocess.Popen(['sleep', '60'])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        with open(self.path, 'w') as f:
            f.write('%d\n' % proc.pid)
        p = pidwatch.identity_of_file(self.path)
        with open('/proc/%d/stat' % proc.pid) as f:
            start = int(f.read().rsplit(')', 1)[1].split()[19])
        self.assertEqual((proc.pid, start, 'sleep'),
                         (p.pid, p.start, p.comm))
