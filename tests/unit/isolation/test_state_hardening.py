"""The isolation state and pid files, as a careless operator or a local
user could leave them: wrong types, missing keys, a tampered group name,
temporaries of a crash, FIFOs where pid files should be."""

import copy
import json
import os
import time

from nova_pinning_hooks.isolation import pidwatch
from nova_pinning_hooks.isolation import state
from tests.unit.isolation import base
from tests.unit.host.test_safefs import Alarm

GROUP = 'nova-pinning-host'


class TestStateTypes(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host.typical()
        self.isolator().apply()
        with open(self.state_file) as f:
            self.good = json.load(f)

    def write(self, content):
        state.save(self.state_file, content)

    def variants(self):
        def edit(fn):
            st = copy.deepcopy(self.good)
            fn(st)
            return st
        pid = sorted(self.good['moved'])[0]
        return [
            ('no v1 record', edit(lambda s: s.pop('v1'))),
            ('v1 not a mapping', edit(lambda s: s.update(v1=[]))),
            ('group missing', edit(lambda s: s['v1'].pop('group'))),
            ('group a number', edit(lambda s: s['v1'].update(group=7))),
            ('root missing', edit(lambda s: s['v1'].pop('cpuset_root'))),
            ('created wrong', edit(lambda s: s['v1'].update(created=[1]))),
            ('previous wrong', edit(lambda s: s['v1'].update(
                previous={'cpuset.cpus': 3}))),
            ('previous unknown key', edit(lambda s: s['v1'].update(
                previous={'tasks': '1'}))),
            ('moved a list', edit(lambda s: s.update(moved=[]))),
            ('start a bool', edit(lambda s: s['moved'][pid].update(
                start=True))),
            ('start a string', edit(lambda s: s['moved'][pid].update(
                start='100'))),
            ('pid not ascii', edit(lambda s: s['moved'].update(
                {'\u0661\u0660\u0660': s['moved'].pop(pid)}))),
            ('affinity wrong', edit(lambda s: s['moved'][pid].update(
                affinity={'x': 1}))),
            ('version true', edit(lambda s: s.update(version=True))),
            ('systemd record missing', edit(lambda s: s.update(
                mode='systemd'))),
        ]

    def test_wrong_types_are_refused_before_anything_acts(self):
        for label, content in self.variants():
            self.write(content)
            exc = self.assertRaises(state.StateError, state.load,
                                    self.state_file)
            self.assertIn(self.state_file, str(exc), label)

    def test_undo_sets_a_malformed_state_aside_and_still_undoes(self):
        for label, content in self.variants():
            if os.path.exists(self.state_file + '.unusable'):
                os.unlink(self.state_file + '.unusable')
            self.isolator().apply() if not os.path.exists(
                self.host.group_dir(GROUP)) else None
            self.write(content)
            result = self.undo()  # never raises
            self.assertTrue(result.failures, label)
            self.assertIn('set aside', result.failures[0], label)
            self.assertTrue(os.path.exists(self.state_file + '.unusable'),
                            label)
            # The configured group was emptied and removed all the same.
            self.assertFalse(os.path.exists(self.host.group_dir(GROUP)),
                             label)


class TestTamperedState(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host.typical()
        self.isolator().apply()

    def test_a_renamed_group_still_puts_the_processes_back(self):
        st = state.load(self.state_file)
        origins = {int(pid): e['cpuset'] for pid, e in st['moved'].items()}
        st['v1']['group'] = 'somewhere-else'
        state.save(self.state_file, st)
        result = self.undo()
        # Every recorded process is back where it came from, and undo
        # says so; before, it failed on every retry and left them
        # confined.
        self.assertEqual((), result.failures)
        self.assertEqual(len(origins), result.restored)
        self.assertEqual(origins, {pid: self.host.cgroup(pid)
                                   for pid in origins})
        self.assertFalse(os.path.exists(self.state_file))

    def test_a_crash_inside_undo_is_a_failure_and_keeps_the_state(self):
        self.useFixture(__import__('fixtures').MonkeyPatch(
            'nova_pinning_hooks.isolation.restore._undo_v1',
            lambda *a: {}['boom']))
        result = self.undo()
        self.assertIn("undo failed: KeyError: 'boom'", result.failures[0])
        self.assertTrue(os.path.exists(self.state_file))

    def test_temporaries_of_a_crash_are_removed(self):
        d = os.path.dirname(self.state_file)
        stale = os.path.join(d, '.isolation.json.a1b2c3d4e5f6.tmp')
        with open(stale, 'w') as f:
            f.write('{"half')
        self.isolator().apply()  # saves the state under the lock
        self.assertFalse(os.path.exists(stale))
        with open(stale, 'w') as f:
            f.write('{"half')
        self.assertEqual((), self.undo().failures)
        self.assertEqual(['isolation.json.lock'], os.listdir(d))


class TestPidFilesThatAreNotFiles(base.TestCase):

    def test_a_fifo_named_like_a_pid_file_never_blocks(self):
        self.useFixture(Alarm(10))
        run = os.path.join(self.host.top, 'run')
        os.makedirs(run)
        os.mkfifo(os.path.join(run, 'x.pid'))
        os.symlink('/etc/hostname', os.path.join(run, 'l.pid'))
        start = time.monotonic()
        self.assertIsNone(pidwatch.read_pid(os.path.join(run, 'x.pid')))
        self.assertIsNone(pidwatch.read_pid(os.path.join(run, 'l.pid')))
        self.assertIsNone(pidwatch.read_pid('/dev/zero'))
        watcher = pidwatch.PidWatcher([run], proc=self.host.paths.proc)
        self.addCleanup(watcher.close)
        self.assertEqual([], watcher.rescan())
        self.assertLess(time.monotonic() - start, 5)

    def test_pid_text_must_be_ascii_digits(self):
        path = os.path.join(self.host.top, 'p.pid')
        for text, pid in (('123\n', 123), ('\u0661\u0662\u0663\n', None),
                          ('1' * 30, None), ('1\n', None)):
            with open(path, 'w') as f:
                f.write(text)
            self.assertEqual(pid, pidwatch.read_pid(path), repr(text))
