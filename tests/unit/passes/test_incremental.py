"""Incremental passes: the host model, libvirt events (the agent, the
binding service that runs them: tests/unit/runtime/test_incremental.py).

Everything through the fake libvirt, whose pin calls emit tunable events
as libvirt's do, and whose ``emit`` and ``restart_daemon`` stand in for
libvirt's event thread.
"""

import time

import fixtures

from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.host import model as model_mod
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from tests.unit import hosts
from tests.unit.passes.test_reconciler import ReconcilerTestCase


# A cpumap for vCPU 0 set by hand, as with virsh vcpupin: CPUs 4-6.
BY_HAND = (False,) * 4 + (True,) * 3


class TestHostModel(ReconcilerTestCase.__mro__[1]):  # testtools.TestCase

    def test_what_to_fetch(self):
        m = model_mod.HostModel()
        listing = [('u1', 1, 'a'), ('u2', 2, 'b')]
        everything, marked = m.take()
        self.assertTrue(everything)  # nothing read yet
        self.assertEqual(['u1', 'u2'], m.to_fetch(listing, everything,
                                                   marked))
        m.store('u1', 1, 'a', '<x/>', {}, None)
        m.store('u2', 2, 'b', '<y/>', {}, None)
        gen = m.generation
        self.assertEqual([], m.to_fetch(listing, *m.take()))
        m.mark('u2')
        m.mark('u2')  # a duplicated event: one fetch
        self.assertEqual(['u2'], m.to_fetch(listing, *m.take()))
        # Re-created (new id) or renamed: fetched though no event came.
        self.assertEqual(['u1', 'u2'], m.to_fetch(
            [('u1', 7, 'a'), ('u2', 2, 'b2')], *m.take()))
        # Same XML again: the generation stays.
        self.assertFalse(m.store('u1', 1, 'a', '<x/>', {}, None))
        self.assertEqual(gen, m.generation)
        self.assertTrue(m.store('u1', 1, 'a', '<x2/>', {}, None))
        self.assertEqual(gen + 1, m.generation)
        # Gone from the listing: forgotten, generation grows.
        m.to_fetch([('u2', 2, 'b')], False, set())
        self.assertEqual(1, len(m))
        self.assertEqual(gen + 2, m.generation)

    def test_marks_made_during_a_pass_stay_for_the_next(self):
        m = model_mod.HostModel()
        m.take()
        m.mark('u1')
        taken = m.take()
        m.mark('u2')  # while the pass that took u1 runs
        self.assertEqual((False, {'u1'}), taken)
        self.assertEqual((False, {'u2'}), m.take())
        m.give_back(*taken)  # that pass failed
        self.assertEqual((False, {'u1'}), m.take())


class IncrementalTestCase(ReconcilerTestCase):

    def setUp(self):
        self.model = model_mod.HostModel()
        super().setUp()
        self.configure(resync_interval=0)

    def reconciler(self):
        rec = reconciler.Reconciler(settings_mod.read(self.conf),
                                    model=self.model)
        self.addCleanup(rec.close)
        return rec

    def settled(self, name, vcpus):
        """A guest booted and bound, its pins read back: the model is
        current and nothing is left to do."""
        dom = self.boot(name, vcpus)
        self.rec.run_pass()
        self.rec.run_pass()
        return dom

    def assertOnePassRepairs(self, dom, pins):
        """The next pass writes one pin, and ``dom`` has ``pins`` again."""
        self.assertEqual(1, len(self.rec.run_pass().applied))
        self.assertEqual(pins, dom.vcpu_pins)

    def calls(self):
        return dict(self.fake.calls)

    def delta(self, before):
        return {k: v - before.get(k, 0) for k, v in self.fake.calls.items()
                if v - before.get(k, 0)}


class TestIncrementalPasses(IncrementalTestCase):

    def test_unchanged_host_one_call_and_no_plan(self):
        for i in range(40):
            self.boot('g%d' % i, 2, i % 2)
        self.assertIsNone(self.rec.run_pass().error)
        self.assertIsNone(self.rec.run_pass().error)  # reads its writes
        before = self.calls()
        result = self.rec.run_pass()
        self.assertEqual({'listAllDomains': 1}, self.delta(before))
        self.assertEqual(([], {'read': 1, 'write': 0}),
                         (result.changes, result.calls))

    def test_one_new_guest_costs_the_same_beside_5_or_50(self):
        costs = []
        for count in (5, 50):
            self.fake.domains.clear()
            for i in range(count):
                self.boot('n%d-%d' % (count, i), 1, 0)
            self.rec.run_pass()
            self.rec.run_pass()
            self.boot('new%d' % count, 2, 1)
            before = self.calls()
            result = self.rec.run_pass()
            self.assertEqual({'new%d' % count},
                             {c.name for c in result.changes})
            costs.append(self.delta(before))
        self.assertEqual(costs[0], costs[1])
        self.assertEqual(1, costs[0]['XMLDesc'])

    def test_one_new_guest_is_planned_and_compared_alone(self):
        # 60 vCPUs a node on 56 pCPUs: both nodes in node range.
        for i in range(30):
            self.boot('h%d' % i, 4, i % 2)
        self.rec.run_pass()
        self.rec.run_pass()
        whole = self.rec._planner.whole
        compared = []
        real = plan_mod.changes

        def counting(p, guests, enforced=None, pairs=None):
            compared.append(len(p.guests) if pairs is None else len(pairs))
            return real(p, guests, enforced, pairs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.engine.plan.changes', counting))
        self.boot('new', 2, 1)
        result = self.rec.run_pass()
        self.assertEqual({'new'}, {c.name for c in result.changes})
        # Neither planned nor compared with the 30 others.
        self.assertEqual((whole, [1]), (self.rec._planner.whole, compared))
        # Its pins read back: nothing else to do.
        self.assertEqual([], self.rec.run_pass().changes)

    def test_a_skipped_write_is_planned_and_written_again_alone(self):
        for i in range(30):  # both nodes in node range
            self.boot('s%d' % i, 4, i % 2)
        self.rec.run_pass()
        self.rec.run_pass()
        whole = self.rec._planner.whole
        self.boot('busy', 2, 1)
        self.fake.busy['busy'] = 100  # every retry of this pass fails
        first = self.rec.run_pass()
        self.assertTrue(first.skipped)
        self.fake.busy['busy'] = 0
        second = self.rec.run_pass()
        self.assertEqual({'busy'}, {c.name for c in second.applied})
        # Neither pass planned the whole host again.
        self.assertEqual((whole, 1), (self.rec._planner.whole,
                                      second.compared))

    def test_a_dry_run_between_passes_makes_the_next_plan_whole(self):
        a = self.settled('a', 2)
        whole = self.rec._planner.whole
        self.boot('b', 1)
        self.assertTrue(self.rec.run_pass(dry_run=True).changes)
        a.vcpu_pins[0] = (4, 5, 6)  # and a change nobody announced
        self.model.mark(a.UUIDString())
        result = self.rec.run_pass()
        self.assertEqual({'a', 'b'}, {c.name for c in result.changes})
        self.assertEqual(whole + 1, self.rec._planner.whole)
        self.assertEqual([], self.rec.run_pass().changes)

    def test_a_pin_changed_behind_its_back_is_read_after_the_event(self):
        a = self.settled('a', 2)
        pins = dict(a.vcpu_pins)
        a.vcpu_pins[0] = (4, 5, 6)  # virsh vcpupin: libvirt says nothing...
        self.assertEqual([], self.rec.run_pass().changes)
        self.model.mark(a.UUIDString())  # ... until its event arrives
        self.assertOnePassRepairs(a, pins)

    def test_the_same_wrong_pin_put_back_again_is_repaired_again(self):
        a = self.settled('a', 2)
        pins = dict(a.vcpu_pins)
        for _ in range(3):  # someone keeps setting it
            a.vcpu_pins[0] = (4, 5, 6)
            self.model.mark(a.UUIDString())
            self.assertOnePassRepairs(a, pins)

    def test_only_changed_domains_are_parsed(self):
        for i in range(10):
            self.boot('p%d' % i, 1)
        self.rec.run_pass()
        self.rec.run_pass()
        from nova_pinning_hooks.engine import guest
        parsed = []
        real = guest.Guest.from_element.__func__

        def counting(cls, root, *args, **kwargs):
            parsed.append(root.find('name').text)
            return real(cls, root, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.engine.guest.Guest.from_element',
            classmethod(counting)))
        self.boot('new', 2)
        self.rec.run_pass()
        self.assertEqual(['new'], parsed)

    def test_a_lost_event_is_caught_by_the_resync(self):
        self.configure(resync_interval=1)
        a = self.settled('a', 2)
        pins = dict(a.vcpu_pins)
        a.vcpu_pins[0] = (4, 5, 6)
        self.assertEqual([], self.rec.run_pass().changes)
        time.sleep(1.05)
        self.assertOnePassRepairs(a, pins)

    def test_recreated_with_the_same_uuid_and_name_is_read_again(self):
        a = self.settled('a', 2)
        uuid = a.UUIDString()
        self.fake.auto_events = False
        a.destroy()
        b = self.fake.add_domain('a', 4, uuid=uuid,
                                 xml=hosts.domain_xml('a', 4, uuid=uuid),
                                 memory_by_node_kib={'0': 65536})
        self.assertNotEqual(a.ID(), b.ID())
        result = self.rec.run_pass()
        self.assertEqual({0, 1, 2, 3}, {c.index for c in result.changes
                                          if c.kind == 'vcpu'})
        self.assertEqual(4, len(b.vcpu_pins))

    def test_a_failed_read_keeps_its_marks(self):
        a = self.settled('a', 2)
        a.vcpu_pins[0] = (4, 5, 6)
        self.model.mark(a.UUIDString())
        self.fake.down = True
        self.assertIsNotNone(self.rec.run_pass().error)
        self.fake.down = False
        result = self.rec.run_pass()
        self.assertEqual(1, len(result.applied))

    def test_dry_run_and_release_never_reuse_a_plan(self):
        self.boot('a', 2)
        dry = self.rec.run_pass(dry_run=True)
        self.assertTrue(dry.changes)
        self.assertEqual(dry.changes, self.rec.run_pass(dry_run=True)
                         .changes)
        self.rec.run_pass()
        released = self.rec.run_pass(release=True)
        self.assertTrue(released.changes)


class TestEvents(IncrementalTestCase):

    def setUp(self):
        super().setUp()
        self.requests = []
        self.host = self.rec.host()
        self.host.watch(self.model, self.requests.append)

    def test_registered_on_each_connection(self):
        conn = self.fake.connections[-1]
        self.assertEqual(7, len(conn.callbacks))
        self.assertIsNotNone(conn.close_callback)
        self.assertEqual((5, 3), conn.keepalive)

    def test_an_event_marks_and_requests(self):
        a = self.boot('a', 2)  # started: a lifecycle event
        self.assertEqual(['LIFECYCLE event of a'], self.requests)
        self.rec.run_pass()  # writes pins: tunable events (our echo)
        # two vCPU pins and the emulator pin
        self.assertEqual(3, self.requests.count('TUNABLE event of a'))
        before = self.calls()
        self.rec.run_pass()  # reads a back once, plans, writes nothing
        self.assertEqual({'listAllDomains': 1, 'XMLDesc': 1},
                         self.delta(before))
        pins = dict(a.vcpu_pins)
        a.pinVcpuFlags(0, BY_HAND, 1)  # by hand: an event
        self.assertOnePassRepairs(a, pins)

    def test_a_guest_still_starting_holds_up_no_one(self):
        # In a burst of boots libvirt lists each new domain while its
        # start job still holds it (until its createXML returns): a pin
        # written then waits for that job, and the pass with it. The
        # pass pins the others and leaves it, unread again, to the pass
        # its started event asks for.
        self.host.call_timeout = 1.0
        s = self.fake.add_domain('s', 2, xml=hosts.domain_xml('s', 2),
                                 memory_by_node_kib={'0': 65536},
                                 starting=True)
        self.addCleanup(lambda: s.job and s.job.set())
        g = self.boot('g', 2)
        result = self.rec.run_pass()
        self.assertIsNone(result.error)
        self.assertEqual({'g'}, {c.name for c in result.applied})
        self.assertEqual({'s'}, {c.name for c, _ in result.skipped})
        self.assertEqual(({}, 2), (s.vcpu_pins, len(g.vcpu_pins)))
        before = self.calls()
        self.rec.run_pass()  # reads g back; s is still starting
        self.assertEqual(1, self.delta(before)['XMLDesc'])
        self.assertEqual({}, s.vcpu_pins)
        s.finish_start()
        self.assertIn('LIFECYCLE event of s', self.requests)
        result = self.rec.run_pass()
        self.assertEqual(({'s'}, []), ({c.name for c in result.applied},
                                       result.skipped))
        self.assertEqual(2, len(s.vcpu_pins))

    def test_a_guest_in_a_migration_job_holds_up_no_one(self):
        # Issue 34 R3: a guest live-migrating off the host runs until the
        # switch-over while libvirt's job holds it; a pin written to it
        # waits for that job, and every pass stopped on it. The pass
        # leaves it as it is, pins the others, and the job's completion
        # event asks for the pass that writes it if it is still here.
        self.host.call_timeout = 1.0
        a = self.fake.add_domain('a', 2, xml=hosts.domain_xml('a', 2),
                                 memory_by_node_kib={'0': 65536})
        a.start_job()
        self.addCleanup(lambda: a.job and a.job.set())
        g = self.boot('g', 2)
        started = time.monotonic()
        result = self.rec.run_pass()
        self.assertLess(time.monotonic() - started, 0.9)
        self.assertIsNone(result.error)
        self.assertEqual({'g'}, {c.name for c in result.applied})
        self.assertEqual({'a'}, {c.name for c, _ in result.skipped})
        self.assertIn('migrating', result.skipped[0][1])
        self.assertEqual(({}, 2), (a.vcpu_pins, len(g.vcpu_pins)))
        a.end_job()  # the migration failed: it stays here
        self.assertIn('JOB_COMPLETED event of a', self.requests)
        result = self.rec.run_pass()
        self.assertEqual(({'a'}, []), ({c.name for c in result.applied},
                                       result.skipped))
        self.assertEqual(2, len(a.vcpu_pins))

    def test_a_daemon_restart_reads_everything_again(self):
        for i in range(5):
            self.boot('g%d' % i, 1)
        self.rec.run_pass()
        self.rec.run_pass()
        self.fake.restart_daemon()
        self.assertIn('connection to qemu:///system closed', self.requests)
        before = self.calls()
        self.assertIsNone(self.rec.run_pass().error)
        delta = self.delta(before)
        self.assertEqual((1, 5, 7), (delta['open'], delta['XMLDesc'],
                                     delta['domainEventRegisterAny']))
        conn = self.fake.connections[-1]
        self.assertFalse(conn.closed)
        self.assertEqual(7, len(conn.callbacks))

    def test_a_callback_that_fails_never_reaches_libvirt(self):
        self.host._on_change = None  # calling it raises TypeError
        a = self.boot('a', 1)  # must not raise out of the callback
        self.assertEqual({a.UUIDString()}, self.model.take()[1])


class TestChangesNobodyAnnounced(IncrementalTestCase):
    """What events miss or repeat: a pass still reads what changed, and
    only that."""

    def settle(self, count=4):
        doms = [self.boot('s%d' % i, 2, i % 2) for i in range(count)]
        self.rec.run_pass()
        self.rec.run_pass()  # reads its own writes back
        return doms

    def test_duplicated_events_fetch_the_domain_once(self):
        doms = self.settle()
        pins = dict(doms[1].vcpu_pins)
        doms[1].vcpu_pins[0] = (4, 5, 6)
        for _ in range(5):
            self.model.mark(doms[1].UUIDString())
        before = self.calls()
        result = self.rec.run_pass()
        self.assertEqual(1, self.delta(before)['XMLDesc'])
        self.assertEqual(['s1'], [c.name for c in result.applied])
        self.assertEqual(pins, doms[1].vcpu_pins)

    def test_renamed_and_started_again_without_any_event(self):
        doms = self.settle()
        uuid = doms[2].UUIDString()
        self.fake.auto_events = False
        doms[2].destroy()  # rename needs a stopped domain in libvirt
        renamed = self.fake.add_domain(
            'renamed', 3, uuid=uuid, xml=hosts.domain_xml('renamed', 3,
                                                         uuid=uuid),
            memory_by_node_kib={'0': 65536})
        before = self.calls()
        result = self.rec.run_pass()
        self.assertIsNone(result.error)
        self.assertEqual(1, self.delta(before)['XMLDesc'])  # it alone
        self.assertEqual({'renamed'}, {c.name for c in result.changes})
        self.assertEqual(3, len(renamed.vcpu_pins))
        self.assertEqual(len(doms), len(self.model))

    def test_an_event_for_a_domain_gone_before_the_pass(self):
        doms = self.settle()
        self.model.mark(doms[0].UUIDString())
        doms[0].destroy()
        gen = self.model.generation
        before = self.calls()
        result = self.rec.run_pass()
        self.assertIsNone(result.error)
        self.assertNotIn('XMLDesc', self.delta(before))
        self.assertEqual(len(doms) - 1, len(self.model))
        self.assertGreater(self.model.generation, gen)

    def test_a_domain_gone_between_listing_and_fetch(self):
        doms = self.settle()
        victim = doms[3]
        self.model.mark(victim.UUIDString())
        self.model.mark(doms[0].UUIDString())
        doms[0].vcpu_pins[1] = (7,)
        real = victim.XMLDesc

        def vanish(flags=0):
            victim.destroy()
            return real(flags)  # raises: no such domain
        victim.XMLDesc = vanish
        result = self.rec.run_pass()
        self.assertIsNone(result.error)
        self.assertEqual(['s0'], [c.name for c in result.applied])
        self.assertEqual(len(doms) - 1, len(self.model))
        before = self.calls()
        self.assertEqual([], self.rec.run_pass().changes)
        self.assertEqual(1, self.delta(before)['XMLDesc'])  # s0 read back

    def test_a_change_during_a_pass_is_read_by_the_next(self):
        doms = self.settle()
        pins = dict(doms[1].vcpu_pins)
        conn_cls = type(self.fake.connections[-1])
        real = conn_cls.listAllDomains

        def listing_then_change(conn, flags=0):
            out = real(conn, flags)
            doms[1].vcpu_pins[0] = (4, 5, 6)  # after the listing...
            self.model.mark(doms[1].UUIDString())  # ... its event
            return out
        self.useFixture(fixtures.MonkeyPatch(
            '%s.%s.listAllDomains' % (conn_cls.__module__,
                                      conn_cls.__name__),
            listing_then_change))
        self.rec.run_pass()  # had taken its marks before the change
        self.useFixture(fixtures.MonkeyPatch(
            '%s.%s.listAllDomains' % (conn_cls.__module__,
                                      conn_cls.__name__), real))
        result = self.rec.run_pass()
        self.assertEqual(['s1'], [c.name for c in result.applied])
        self.assertEqual(pins, doms[1].vcpu_pins)


class TestEventsAfterDrops(IncrementalTestCase):

    def setUp(self):
        super().setUp()
        self.requests = []
        self.rec.host().watch(self.model, self.requests.append)

    def test_a_connection_lost_without_its_close_event(self):
        for i in range(3):
            self.boot('g%d' % i, 1)
        self.rec.run_pass()
        self.rec.run_pass()
        old = self.fake.connections[-1]
        old.closed = True  # dead, and libvirt told nobody
        before = self.calls()
        self.assertIsNone(self.rec.run_pass().error)
        delta = self.delta(before)
        # Events may have been missed meanwhile: everything read again.
        self.assertEqual((1, 3), (delta['open'], delta['XMLDesc']))
        new = self.fake.connections[-1]
        self.assertIsNot(old, new)
        self.assertEqual(7, len(new.callbacks))
        # The new connection carries the events: a pin set by hand is
        # marked, and repaired by the next pass.
        a = self.fake.by_name('g0')
        pins = dict(a.vcpu_pins)
        a.pinVcpuFlags(0, BY_HAND, 1)
        self.assertIn('TUNABLE event of g0', self.requests)
        self.assertOnePassRepairs(a, pins)


class TestResyncTiming(IncrementalTestCase):

    def test_a_pass_a_little_early_is_the_resync(self):
        # The agent's resync timer and its passes drift by the coalescing
        # delay: a pass slightly before the due time must still read
        # everything, or the resync comes one whole period late.
        self.configure(resync_interval=60)
        for i in range(3):
            self.boot('g%d' % i, 1)
        self.rec.run_pass()  # first read: everything
        self.rec.run_pass()  # reads its writes back
        before = self.calls()
        self.rec.run_pass()
        self.assertNotIn('XMLDesc', self.delta(before))  # not due
        self.rec._next_resync = time.monotonic() + 30
        self.rec.run_pass()
        self.assertNotIn('XMLDesc', self.delta(before))  # half a period
        self.rec._next_resync = time.monotonic() + 0.2  # the timer's lead
        self.rec.run_pass()
        self.assertEqual(3, self.delta(before).get('XMLDesc', 0))
        before = self.calls()
        self.rec.run_pass()  # the next one is due a period later
        self.assertNotIn('XMLDesc', self.delta(before))
