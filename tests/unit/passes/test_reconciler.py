"""Passes through the fake libvirt: read, plan, diff, apply."""

import threading
import time

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.passes import passlock
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from tests import fakelibvirt
from tests.fixtures import FakeLibvirtFixture
from tests.unit import hosts


class ReconcilerTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        conf_mod.register_opts(self.conf)
        cf = self.useFixture(config_fixture.Config(self.conf))
        self.tmp = self.useFixture(fixtures.TempDir()).path
        # The write counts below are those of emulator and I/O threads
        # with the vCPUs; test_emuthreads.py passes with ``shared``.
        cf.config(group='nova_pinning', allocation_ratio=4.0,
                  emulator_threads='guest',
                  lock_path=self.tmp, busy_retry_delay=0,
                  overcommit_file=self.tmp + '/overcommit.json')
        self.cf = cf
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('intel-2s-28c-ht'))).host
        self.rec = self.reconciler()

    def reconciler(self):
        """A reconciler of the configuration as it is now (it reads it
        once: ``settings.read``), closed at the end of the test."""
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(rec.close)
        return rec

    def configure(self, **values):
        """Set ``[nova_pinning]`` options and make ``self.rec`` again
        with them, as a process started with them would."""
        self.cf.config(group='nova_pinning', **values)
        self.rec.close()
        self.rec = self.reconciler()

    def boot(self, name, vcpus, node=0):
        return self.fake.add_domain(
            name, vcpus, xml=hosts.domain_xml(name, vcpus),
            memory_by_node_kib={str(node): 65536})


class TestPass(ReconcilerTestCase):

    def test_pass_applies_and_second_pass_writes_nothing(self):
        a, b = self.boot('a', 4, 0), self.boot('b', 2, 1)
        first = self.rec.run_pass()
        self.assertIsNone(first.error)
        self.assertEqual(len(first.changes), len(first.applied))
        self.assertEqual(4, len(a.vcpu_pins))
        self.assertEqual(2, len(b.vcpu_pins))
        self.assertEqual(first.calls['write'], self.fake.writes())
        writes = self.fake.writes()
        second = self.rec.run_pass()
        self.assertEqual(([], 0), (second.changes, second.calls['write']))
        self.assertEqual(writes, self.fake.writes())

    def test_new_guest_moves_no_one(self):
        a = self.boot('a', 4, 0)
        self.rec.run_pass()
        pins = dict(a.vcpu_pins)
        self.boot('c', 2, 0)
        result = self.rec.run_pass()
        self.assertEqual(pins, a.vcpu_pins)
        self.assertEqual({'c'}, {c.name for c in result.changes})

    def test_dry_run_writes_nothing(self):
        self.boot('a', 2)
        result = self.rec.run_pass(dry_run=True)
        self.assertTrue(result.changes)
        self.assertEqual(0, self.fake.writes())

    def test_guest_destroyed_mid_pass_is_skipped(self):
        self.boot('a', 2)
        self.boot('b', 2)
        self.fake.vanish_on_pin.add('a')
        result = self.rec.run_pass()
        self.assertIsNone(result.error)
        self.assertEqual({'a'}, {c.name for c, _ in result.skipped})
        self.assertEqual(3, len(result.applied))

    def test_libvirt_down_is_an_error_not_an_exception(self):
        self.boot('a', 2)
        self.fake.down = True
        result = self.rec.run_pass()
        self.assertIn('Broken pipe', result.error)
        self.fake.down = False
        self.assertIsNone(self.rec.run_pass().error)

    def test_libvirtd_restart_between_passes(self):
        self.boot('a', 2)
        self.rec.run_pass()
        fakelibvirt.drop_connections(self.fake)
        self.boot('b', 1)
        result = self.rec.run_pass()
        self.assertIsNone(result.error)
        self.assertEqual({'b'}, {c.name for c in result.applied})

    def test_disabled_does_nothing(self):
        self.boot('a', 2)
        self.configure(enabled=False)
        result = self.rec.run_pass()
        self.assertIn('disabled', result.error)
        self.assertEqual(0, sum(self.fake.calls.values()))

    def test_release_runs_switched_off(self):
        # Switched off is when release is run (doc/source/admin/nova.rst).
        self.boot('a', 2)
        self.rec.run_pass()
        self.configure(enabled=False)
        result = self.rec.run_pass(release=True)
        self.assertIsNone(result.error)
        every = tuple(range(112))  # the host's online CPUs
        self.assertEqual({0: every, 1: every},
                         self.fake.by_name('a').vcpu_pins)

    def test_nova_placed_guest_untouched(self):
        xml = hosts.domain_xml('pinned', 2, numa_cells=True,
                               pins={0: '5', 1: '61'}, emulator='5,61')
        self.fake.add_domain('pinned', 2, xml=xml)
        self.boot('a', 2)
        self.rec.run_pass()
        dom = self.fake.by_name('pinned')
        self.assertEqual({0: (5,), 1: (61,)}, dom.vcpu_pins)
        a_cpus = {c for p in self.fake.by_name('a').vcpu_pins.values()
                  for c in p}
        self.assertFalse(a_cpus & {5, 61})


class TestSettings(ReconcilerTestCase):

    def test_ratio_must_be_positive(self):
        self.configure(allocation_ratio=0.0)
        result = self.rec.run_pass()
        self.assertIn('allocation_ratio', result.error)
        self.assertEqual(0, self.fake.writes())

    def test_reserved_cpus_the_host_lacks(self):
        self.boot('a', 1)
        self.configure(reserved_cpus='0,500')
        result = self.rec.run_pass()
        self.assertIn('reserved_cpus', result.error)
        self.assertEqual(0, self.fake.writes())

    def test_reserved_cpus_leave_the_pool(self):
        a = self.boot('a', 2)
        self.configure(reserved_cpus='0-3,56-59')
        self.rec.run_pass()
        cpus = {c for p in a.vcpu_pins.values() for c in p}
        self.assertFalse(cpus & {0, 1, 2, 3, 56, 57, 58, 59})


class TestLock(ReconcilerTestCase):

    def test_passes_do_not_overlap(self):
        self.boot('a', 2)
        inside, overlap = [0], []
        original = reconciler.Reconciler._pass

        def slow_pass(rec, *args):
            inside[0] += 1
            if inside[0] > 1:
                overlap.append(True)
            threading.Event().wait(0.05)
            try:
                return original(rec, *args)
            finally:
                inside[0] -= 1
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.passes.reconciler.Reconciler._pass',
            slow_pass))
        others = [reconciler.Reconciler(settings_mod.read(self.conf))
                  for _ in range(4)]
        threads = [threading.Thread(target=r.run_pass) for r in others]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        self.assertEqual([], overlap)


class TestRelease(ReconcilerTestCase):

    def test_release_puts_guests_on_every_cpu_once(self):
        a = self.boot('a', 2)
        xml = hosts.domain_xml('nova', 1, numa_cells=True, pins={0: '5'})
        nova = self.fake.add_domain('nova', 1, xml=xml)
        self.rec.run_pass()
        self.assertEqual(1, len(a.vcpu_pins[0]))
        result = self.rec.run_pass(release=True)
        self.assertIsNone(result.error)
        everything = tuple(range(112))
        self.assertEqual({0: everything, 1: everything}, a.vcpu_pins)
        self.assertEqual(everything, a.emulator_pin)
        self.assertEqual({0: (5,)}, nova.vcpu_pins)  # nova's: untouched
        again = self.rec.run_pass(release=True)
        self.assertEqual(0, again.calls['write'])


class TestTimeBounds(ReconcilerTestCase):
    """A hung libvirtd: every call and the pass as a whole are bounded,
    the pass ends with an error and the lock is free again."""

    def setUp(self):
        super().setUp()
        self.release = threading.Event()
        self.addCleanup(self.release.set)  # let abandoned calls end
        # Bounds far apart, so that a loaded machine cannot blur them: a
        # call 0.3 s, a pass 20 s; a hung call is released only at the
        # end of the test.
        self.configure(libvirt_call_timeout=0.3,
                       pass_timeout=20, lock_timeout=0)

    def test_a_hung_read_ends_the_pass_and_frees_the_lock(self):
        self.boot('a', 2)
        self.fake.hang['XMLDesc'] = self.release
        start = time.monotonic()
        result = self.rec.run_pass()
        # Ended by the call's bound, not by the pass's.
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual('failed', result.error_kind)
        self.assertIn('did not return within 0.3 s', result.error)
        self.assertEqual(0, self.fake.writes())
        # lock_timeout is 0: this fails unless the lock was released.
        del self.fake.hang['XMLDesc']
        again = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(again.close)
        # While the abandoned call is still blocked, passes fail at once:
        # no new connection, no new thread (hung.py).
        # (The message itself says no call of its own waited.)
        self.assertIn('libvirtd does not answer', again.run_pass().error)
        # Once it returns, the next pass reconnects by itself.
        self.release.set()
        for _ in range(50):
            if again.run_pass().error is None:
                break
            time.sleep(0.05)
        self.assertIsNone(again.run_pass().error)
        self.assertIsNone(self.rec.run_pass().error)

    def test_a_hung_write_skips_the_rest(self):
        self.boot('a', 2)
        self.boot('b', 2)
        self.fake.hang['pinVcpuFlags'] = self.release
        self.fake.hang_after['pinVcpuFlags'] = 1
        result = self.rec.run_pass()
        self.assertEqual('failed', result.error_kind)
        self.assertEqual(1, len(result.applied))
        self.assertEqual(len(result.changes) - 1, len(result.skipped))
        self.assertFalse(result.complete)

    def test_the_pass_deadline_bounds_many_slow_calls(self):
        # 30 guests at 0.3 s a call: without the deadline the pass takes
        # 18 s or more; with it, about its 1 s and one call.
        for i in range(30):
            self.boot('g%d' % i, 1)
        self.configure(pass_timeout=1,
                       libvirt_call_timeout=5)
        original = fakelibvirt.FakeHost.count

        def slow(host, method):
            original(host, method)
            time.sleep(0.3)
        self.useFixture(fixtures.MonkeyPatch(
            'tests.fakelibvirt.FakeHost.count', slow))
        start = time.monotonic()
        result = self.rec.run_pass()
        self.assertLess(time.monotonic() - start, 8)
        self.assertEqual('failed', result.error_kind)
        self.assertIn('deadline', result.error)

    def test_waiting_for_the_lock_is_bounded(self):
        self.configure(lock_timeout=0.2)
        with passlock.PassLock(self.tmp, 1):
            result = self.rec.run_pass()
        self.assertEqual('failed', result.error_kind)
        self.assertIn('held the lock', result.error)


class TestKernelDrift(ReconcilerTestCase):
    """The kernel runs a vCPU elsewhere than libvirt's pin says."""

    def test_a_pass_repairs_a_vcpu_moved_behind_libvirts_back(self):
        a = self.boot('a', 2)
        self.rec.run_pass()
        pins = {v: frozenset(c) for v, c in a.vcpu_pins.items()}
        kernel = dict(pins)
        kernel[1] = frozenset([0, 1, 2])
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.virtread.Reader._affinity',
            lambda _self, name: {str(v): cpuset.format(c)
                                 for v, c in kernel.items()}))
        snap, _, changes = self.rec.plan()
        self.assertEqual({a.UUIDString(): {1: (pins[1], kernel[1])}},
                         snap.drift())
        self.assertEqual([(1, kernel[1], pins[1])],
                         [(c.index, c.old, c.new) for c in changes])
        result = self.rec.run_pass()
        self.assertEqual(1, result.calls['write'])
        self.assertEqual(pins, {v: frozenset(c)
                                for v, c in a.vcpu_pins.items()})
