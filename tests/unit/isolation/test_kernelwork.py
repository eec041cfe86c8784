"""Interrupts, the unbound workqueue mask and irqbalance following the
one-to-one CPUs, on the fake host (4 CPUs, CPU 0 reserved). As the
command prints them: tests/unit/cmd/test_isolate.py; as metrics:
tests/unit/observe/test_kernelwork.py."""

import errno
import json
import logging

import fixtures

from nova_pinning_hooks.engine import cpumask
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation.kernel import interrupts
from nova_pinning_hooks.isolation.kernel import irqbalance
from nova_pinning_hooks.isolation.kernel import pinmap
from tests.unit.isolation import base

S = cpuset.parse


class TestPure(base.testtools.TestCase):

    def test_one_to_one(self):
        for affinities, expected in (
                ([], ''),
                ([S('2'), S('3')], '2-3'),           # one-to-one guest
                ([S('2-3'), S('2-3')], ''),          # node range
                ([S('2'), S('2')], ''),              # two on one CPU
                ([S('2'), S('1-3')], ''),            # another may run there
                ([S('2'), S('3'), S('1')], '1-3'),
                ([S('2'), S('0-1')], '2')):
            self.assertEqual(S(expected, allow_empty=True),
                             pinmap.one_to_one(affinities), affinities)

    def test_target(self):
        online = S('0-3')
        for base_, one, expected in (
                ('0-3', '2-3', '0-1'),
                ('3', '2-3', '0-1'),     # nothing of its own left: all
                ('1,3', '3', '1'),
                ('0-3', '', '0-3'),
                ('0-7', '2', '0-1,3'),   # offline CPUs are not targets
                ('0-3', '0-3', None)):
            got = interrupts.target(S(base_), S(one, allow_empty=True),
                                    online)
            self.assertEqual(expected, got and cpuset.format(got))

    def test_masks(self):
        for text, cpus in (('ff', '0-7'), ('000000ff', '0-7'),
                           ('00000001,00000003', '0-1,32'),
                           ('0', '')):
            self.assertEqual(S(cpus, allow_empty=True), cpumask.parse(text))
        for cpus in ('0', '0-7', '4-5,33,64'):
            self.assertEqual(S(cpus), cpumask.parse(cpumask.format(S(cpus))))
        for bad in ('', 'xyz', '1,,2', '123456789', None):
            self.assertRaises(ValueError, cpumask.parse, bad)

    def test_firing_on(self):
        before = {24: {0: 5, 2: 10}, 25: {0: 1, 2: 0}}
        after = {24: {0: 9, 2: 12}, 25: {0: 3, 2: 0}, 26: {3: 4}}
        self.assertEqual({24: 2, 26: 4},
                         interrupts.firing_on(before, after, S('2-3')))


class PinsCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host.typical()
        for n in (24, 25, 26):
            self.host.irq(n, '0-3')
        self.host.irq(27, '3')
        self.host.irq(28, '2', managed=True)   # a queue's managed vector
        self.host.irq(29, '0')                 # never on a one-to-one CPU
        self.host.workqueue('f')
        self.log = self.useFixture(fixtures.FakeLogger(
            level=logging.INFO, format='%(levelname)s %(message)s'))

    def one_to_one_guest(self):
        self.host.guest('g1', 300, {0: '2', 1: '3'})

    def node_range_guest(self):
        self.host.guest('g1', 300, {0: '2-3', 1: '2-3'})

    def recorded(self):
        with open(self.state_file) as f:
            return json.load(f)

    def cpus(self):
        return {n: self.host.irq_cpus(n) for n in range(24, 30)}

    def lines(self, word):
        return [line for line in self.log.output.splitlines()
                if word in line]


class TestInterrupts(PinsCase):

    def test_off_one_to_one_then_back_with_node_range_then_undo(self):
        self.one_to_one_guest()
        iso = self.isolator()
        iso.apply()
        self.assertEqual({24: '0-1', 25: '0-1', 26: '0-1', 27: '0-1',
                          28: '2', 29: '0'}, self.cpus())
        self.assertEqual('0-1', self.host.irq_cpus(
            24, 'effective_affinity_list'))
        self.assertEqual('00000003', self.host.get_workqueue())
        st = self.recorded()
        self.assertEqual({'original': '3', 'set': '0-1'},
                         st['interrupts']['moved']['27'])
        self.assertEqual(['28'], list(st['interrupts']['refused']))
        self.assertEqual({'original': '0000000f', 'set': '00000003'},
                         st['workqueue'])
        # One line for the refused interrupt, naming why.
        refused = self.lines('refused a new CPU set')
        self.assertEqual(1, len(refused), self.log.output)
        self.assertIn('interrupts 28 ', refused[0])
        self.assertIn('managed by the kernel', refused[0])

        # Nothing changed: nothing written, the managed one not retried,
        # the state not rewritten.
        writes = list(self.host.irq_writes)
        iso.follow_pins()
        iso.follow_pins()
        self.assertEqual(writes, self.host.irq_writes)
        self.assertEqual(1, len(self.lines('refused a new CPU set')))

        # The node goes to node range: everything back where it was.
        self.node_range_guest()
        iso.follow_pins()
        self.assertEqual({24: '0-3', 25: '0-3', 26: '0-3', 27: '3',
                          28: '2', 29: '0'}, self.cpus())
        self.assertEqual('0000000f', self.host.get_workqueue())
        st = self.recorded()
        self.assertEqual({}, st['interrupts']['moved'])
        self.assertEqual({}, st['workqueue'])

        # One-to-one again, then undo restores every original.
        self.one_to_one_guest()
        iso.follow_pins()
        self.assertEqual('0-1', self.host.irq_cpus(25))
        result = self.undo()
        self.assertEqual((), result.failures)
        self.assertEqual({24: '0-3', 25: '0-3', 26: '0-3', 27: '3',
                          28: '2', 29: '0'}, self.cpus())
        self.assertEqual('0000000f', self.host.get_workqueue())
        self.assertRaises(FileNotFoundError, open, self.state_file)

    def test_original_recorded_before_the_write(self):
        self.one_to_one_guest()
        seen = []
        write = interrupts._write

        def spy(path, value):
            irq = path.split('/')[-2]
            seen.append(irq in self.recorded()['interrupts']['moved'])
            write(path, value)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.kernel.interrupts._write', spy))
        self.isolator().apply()
        self.assertEqual([True] * 5, seen)  # 24-27 and the managed 28

    def test_drift_repaired_other_choices_left_alone(self):
        self.one_to_one_guest()
        iso = self.isolator()
        iso.apply()
        self.host.irq(24, '0-2')   # someone put it back on CPU 2
        self.host.irq(25, '1')     # irqbalance chose CPU 1: fine
        iso.follow_pins()
        self.assertEqual(('0-1', '1'), (self.host.irq_cpus(24),
                                        self.host.irq_cpus(25)))
        self.undo()
        self.assertEqual(('0-3', '0-3'), (self.host.irq_cpus(24),
                                          self.host.irq_cpus(25)))

    def test_an_interrupt_that_refuses_leaves_nothing_half_done(self):
        # A non-managed interrupt that refuses (EINVAL from its chip):
        # not recorded as moved, the others go on, undo has nothing of
        # it to restore.
        self.one_to_one_guest()
        write = interrupts._write

        def refuse_25(path, value):
            if '/irq/25/' in path:
                raise OSError(errno.EINVAL, 'Invalid argument')
            write(path, value)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.kernel.interrupts._write',
            refuse_25))
        self.isolator().apply()
        st = self.recorded()
        self.assertNotIn('25', st['interrupts']['moved'])
        self.assertEqual('Invalid argument',
                         st['interrupts']['refused']['25'])
        self.assertEqual(('0-1', '0-3', '0-1'), (
            self.host.irq_cpus(24), self.host.irq_cpus(25),
            self.host.irq_cpus(26)))
        self.assertEqual(1, len(self.lines('refused a new CPU set')))
        self.assertEqual((), self.undo().failures)
        self.assertEqual('0-3', self.host.irq_cpus(24))

    def test_an_interrupt_freed_meanwhile_is_forgotten(self):
        self.one_to_one_guest()
        iso = self.isolator()
        iso.apply()
        import shutil
        shutil.rmtree('%s/irq/24' % self.host.paths.proc)
        iso.follow_pins()
        self.assertNotIn('24', self.recorded()['interrupts']['moved'])
        self.assertEqual((), self.undo().failures)

    def test_undo_that_cannot_restore_keeps_the_state(self):
        self.one_to_one_guest()
        self.isolator().apply()
        self.host.managed.add(24)   # the kernel refuses it now
        result = self.undo()
        self.assertEqual(1, len(result.failures), result)
        self.assertIn('interrupt 24: cannot set 0-3 back', result.failures[0])
        self.assertEqual(['24'], list(self.recorded()['interrupts']['moved']))
        self.assertEqual('0-3', self.host.irq_cpus(25))  # the rest undone
        self.host.managed.discard(24)
        self.assertEqual((), self.undo().failures)
        self.assertEqual('0-3', self.host.irq_cpus(24))
        self.assertRaises(FileNotFoundError, open, self.state_file)

    def test_switched_off(self):
        self.config(interrupts=False, workqueues=False)
        self.one_to_one_guest()
        self.isolator().apply()
        self.assertEqual('0-3', self.host.irq_cpus(24))
        self.assertEqual('f', self.host.get_workqueue())
        self.assertEqual([], self.host.irq_writes)


class TestWorkqueue(PinsCase):

    def test_a_mask_the_kernel_rejects(self):
        self.one_to_one_guest()
        self.host.reject_workqueue = True
        iso = self.isolator()
        iso.apply()
        self.assertEqual('f', self.host.get_workqueue())
        self.assertNotIn('original', self.recorded()['workqueue'])
        self.assertEqual(1, len(self.lines('refused workqueue mask')))
        # The interrupts went on all the same.
        self.assertEqual('0-1', self.host.irq_cpus(24))
        iso.follow_pins()  # not tried again for the same CPUs
        self.assertEqual(1, len(self.lines('refused workqueue mask')))
        self.assertEqual((), self.undo().failures)
        self.assertEqual('f', self.host.get_workqueue())

    def test_no_mask_file(self):
        import os
        os.unlink(self.host.paths.workqueue_mask)
        self.one_to_one_guest()
        self.isolator().apply()
        self.assertEqual('0-1', self.host.irq_cpus(24))
        self.assertNotIn('original', self.recorded().get('workqueue', {}))


class TestIrqbalance(PinsCase):

    def test_told_then_given_its_choice_back(self):
        fake = self.host.irqbalance(banned='1')
        self.one_to_one_guest()
        iso = self.isolator()
        iso.apply()
        self.assertEqual(['setup', 'settings cpus 1-3'], fake.heard(2))
        self.assertEqual(S('1-3'), fake.banned)
        self.assertEqual({'pid': 700, 'start': 100, 'original': '1',
                          'told': '1-3'}, self.recorded()['irqbalance'])
        iso.follow_pins()   # nothing changed: nothing said
        self.assertEqual(2, len(fake.heard(3, timeout=0.5)))
        self.node_range_guest()
        iso.follow_pins()
        self.assertEqual('settings cpus NULL', fake.heard(3)[-1])
        self.assertEqual(S('1'), fake.banned)
        self.one_to_one_guest()
        iso.follow_pins()
        self.assertEqual('settings cpus 1-3', fake.heard(4)[-1])
        self.assertEqual((), self.undo().failures)
        self.assertEqual('settings cpus NULL', fake.heard(5)[-1])
        self.assertEqual(S('1'), fake.banned)
        self.assertNotIn('no credentials', [m[0] for m in fake.messages
                                            if isinstance(m, tuple)])

    def test_gone_mid_run(self):
        fake = self.host.irqbalance()
        self.one_to_one_guest()
        iso = self.isolator()
        iso.apply()
        self.assertEqual('settings cpus 2-3', fake.heard(2)[-1])
        fake.stop()
        self.host.exit(700)
        self.node_range_guest()
        iso.follow_pins()   # no irqbalance to tell: the rest goes on
        self.assertEqual('0-3', self.host.irq_cpus(24))
        self.assertEqual(1, len(self.lines('irqbalance (pid 700) is gone')))
        self.assertEqual({}, self.recorded()['irqbalance'])
        self.assertEqual((), self.undo().failures)

    def test_socket_gone_process_still_there(self):
        fake = self.host.irqbalance()
        fake.stop()
        self.one_to_one_guest()
        iso = self.isolator()
        iso.apply()
        warned = self.lines('cannot tell irqbalance')
        self.assertEqual(1, len(warned), self.log.output)
        # The agent keeps the interrupts off alone; not retried each pass,
        # nor later: no socket is not a busy irqbalance.
        self.assertEqual('0-1', self.host.irq_cpus(24))
        self.assertNotIn('retry_at', self.recorded()['irqbalance'])
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.kernel.irqbalance.clock',
            lambda: 1e10))
        iso.follow_pins()
        self.assertEqual(1, len(self.lines('cannot tell irqbalance')))
        self.assertEqual((), self.undo().failures)
        self.assertEqual('0-3', self.host.irq_cpus(24))

    def test_a_timeout_is_tried_again_later(self):
        # irqbalance busy rescanning on a loaded host: the message times
        # out; it is told again after RETRY_FIRST s, then twice as long.
        fake = self.host.irqbalance()
        now = [1000.0]
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.kernel.irqbalance.clock',
            lambda: now[0]))
        real_tell = irqbalance.tell
        busy = [2]

        def tell(path, cpus, timeout=irqbalance.TIMEOUT):
            if busy[0]:
                busy[0] -= 1
                raise TimeoutError('timed out')
            real_tell(path, cpus, timeout)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.kernel.irqbalance.tell', tell))
        self.one_to_one_guest()
        iso = self.isolator()
        iso.apply()
        self.assertEqual(['setup'], fake.heard(1))
        on_disk = self.recorded()
        rec = on_disk['irqbalance']
        # The retry lies beside the record, at the top level: 1.0.0's
        # undo refuses a record with keys it does not know, and ignores
        # unknown top-level keys (a rollback while irqbalance is busy).
        self.assertLessEqual(set(rec), {'pid', 'start', 'original', 'told',
                                        'failed'})
        retry = on_disk[state.RETRY_KEY]
        self.assertEqual(('2-3', 1030.0, 1),
                         (rec['failed'], retry['retry_at'], retry['retries']))
        self.assertEqual(1, len(self.lines('tried again in 30 s')))
        now[0] = 1029.0
        iso.follow_pins()   # not yet
        self.assertEqual(1, len(self.lines('cannot tell irqbalance')))
        now[0] = 1030.0
        iso.follow_pins()   # due: times out again, waits twice as long
        retry = self.recorded()[state.RETRY_KEY]
        self.assertEqual((1090.0, 2), (retry['retry_at'], retry['retries']))
        # and read back into the record, as the agent keeps it
        self.assertEqual((1090.0, 2), tuple(
            state.load(self.state_file)['irqbalance'][k]
            for k in ('retry_at', 'retries')))
        self.assertEqual(1, len(self.lines('tried again in 60 s')))
        now[0] = 1090.0
        iso.follow_pins()   # irqbalance answers now
        self.assertEqual('settings cpus 2-3', fake.heard(2)[-1])
        self.assertEqual(S('2-3'), fake.banned)
        self.assertEqual({'pid': 700, 'start': 100, 'original': '',
                          'told': '2-3'}, self.recorded()['irqbalance'])
        self.assertNotIn(state.RETRY_KEY, self.recorded())
        self.assertEqual((), self.undo().failures)
        self.assertEqual('settings cpus NULL', fake.heard(3)[-1])

    def test_a_restarted_irqbalance_is_told_again(self):
        fake = self.host.irqbalance()
        self.one_to_one_guest()
        iso = self.isolator()
        iso.apply()
        fake.stop()
        self.host.exit(700)
        again = self.host.irqbalance(pid=701)
        iso.follow_pins()
        self.assertEqual(['setup', 'settings cpus 2-3'], again.heard(2))


class TestStatus(PinsCase):
    """The recorded state of the kernel work (the status as the command
    prints it: tests/unit/cmd/test_isolate.py)."""

    def test_bad_state_entries_are_refused(self):
        self.one_to_one_guest()
        self.isolator().apply()
        st = self.recorded()
        for part, value in (
                ('interrupts', {'moved': {'../x': {'original': '0',
                                                   'set': '0'}}}),
                ('interrupts', {'moved': {'24': {'original': 'x',
                                                 'set': '0'}}}),
                ('workqueue', {'original': '/etc/passwd'}),
                ('irqbalance', {'pid': 'x'})):
            bad = dict(st, **{part: value})
            with open(self.state_file, 'w') as f:
                json.dump(bad, f)
            self.assertRaises(state.StateError, state.load, self.state_file)
