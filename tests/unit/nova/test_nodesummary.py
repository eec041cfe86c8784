"""The plan's summary in the compute node's stats (``nodesummary``), on a
stand-in for nova's resource tracker (``tests.fixtures``), and what the
pass worker leaves for it under eventlet."""

import json
import logging
import os

import fixtures

from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.nova import hookpoints
from nova_pinning_hooks.nova import nodesummary
from nova_pinning_hooks.runtime import service as service_mod
from nova_pinning_hooks.runtime import settings as runtime_settings
from tests.unit import hosts
from tests.fixtures import pass_runner
from tests.unit.nova.test_activation import AgentTestCase
from tests.unit.novaconf import nova_like_conf

KEY = summary_mod.KEY
GIB = 1024 * 1024


class FakeNode:
    """A ComputeNode's stats as nova's resource tracker leaves them, and
    how often they were assigned (nova saves a field assigned)."""

    def __init__(self):
        self._stats = {'num_instances': '2', 'uptime': None}
        self.assigned = 0

    def obj_attr_is_set(self, name):
        return name == 'stats'

    @property
    def stats(self):
        return self._stats

    @stats.setter
    def stats(self, value):
        self.assigned += 1
        self._stats = value


class SummaryTestCase(AgentTestCase):

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.FakeLogger(
            name='nova_pinning_hooks', level=logging.INFO))
        self.fake.add_domain('a', 2, xml=hosts.domain_xml('a', 2,
                                                          uuid='uuid-a'),
                             memory_by_node_kib={'0': GIB})
        self.fake.add_domain('b', 1, xml=hosts.domain_xml('b', 1,
                                                          uuid='uuid-b'),
                             memory_by_node_kib={'0': GIB})
        self.tracker_cls = self.nova.tracker_cls

    def activate(self, **pinning):
        conf = nova_like_conf(self, **pinning)
        agent = activation.activate(conf, manager_cls=self.cls)
        self.addCleanup(hookpoints.uninstall, self.tracker_cls,
                        activation.SUMMARY_HOOK)
        self.assertTrue(agent.coalescer.request('test', wait=True,
                                                timeout=10))
        return agent

    def reported(self, tracked=('uuid-a', 'uuid-b')):
        node = FakeNode()
        tracker = self.tracker_cls(tracked)
        tracker._update('context', node)
        return node, tracker


class TestReported(SummaryTestCase):

    def test_every_update_carries_the_plan_summary(self):
        self.activate()
        node, tracker = self.reported()
        s = summary_mod.decode(node.stats[KEY])
        self.assertEqual((3, 0, 4.0), (s.seen, s.cross, s.ratio))
        self.assertEqual([(0, 4, 3, 2 * GIB)],
                         [(n.id, n.pool, n.vcpus, n.homed_kib)
                          for n in s.nodes])
        # nova's own keys untouched; the stats assigned back (saved), and
        # nova's _update ran after the hook with the key in them.
        self.assertEqual('2', node.stats['num_instances'])
        self.assertEqual(1, node.assigned)
        self.assertEqual(node.stats[KEY], tracker.saved[0][KEY])
        self.assertLess(len(node.stats[KEY]), 200)

    def test_guests_nova_no_longer_counts_are_taken_out(self):
        """b was deleted: nova's resource tracker stopped counting it
        before the next pass saw it go."""
        self.activate()
        node, _ = self.reported(tracked=('uuid-a',))
        s = summary_mod.decode(node.stats[KEY])
        self.assertEqual((2, 2), (s.seen, s.nodes[0].vcpus))

    def test_switched_off_nothing_wrapped(self):
        self.activate(report_summary=False)
        self.assertFalse(getattr(self.tracker_cls._update,
                                 hookpoints.MARK, None))
        node, _ = self.reported()
        self.assertNotIn(KEY, node.stats)


class TestNeverIntoNova(SummaryTestCase):

    def test_a_failing_source_leaves_the_key_out_once_logged(self):
        self.activate()
        node, _ = self.reported()
        self.assertIn(KEY, node.stats)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.engine.summary.report',
            lambda *a: 1 / 0))
        tracker = self.tracker_cls(('uuid-a',))
        for _ in range(3):
            tracker._update('context', node)  # no exception reaches it
        self.assertNotIn(KEY, node.stats)
        self.assertEqual(3, len(tracker.saved))
        self.assertEqual(1, self.logs.output.count(
            'no summary for nova\'s scheduler: ZeroDivisionError'))

    def test_too_old_not_reported(self):
        self.activate(summary_max_age=60)
        activation._REPORTER.clock = lambda: 10 ** 10
        node, _ = self.reported()
        self.assertNotIn(KEY, node.stats)
        self.assertIn('older than summary_max_age (60 s)', self.logs.output)

    def test_stats_not_filled_yet(self):
        self.activate()
        node = FakeNode()
        node.obj_attr_is_set = lambda name: False
        self.assertIsNone(activation.report_summary(node, None))
        self.assertEqual(0, node.assigned)

    def test_a_tracker_of_another_shape_is_not_wrapped(self):
        class Other:
            def _update(self, compute_node):
                return None
        self.assertFalse(nodesummary.install(Other, 'x'))
        self.assertFalse(getattr(Other._update, hookpoints.MARK, None))


class TestUnderEventlet(SummaryTestCase):
    """The pass worker writes what it planned; nova-compute reads it."""

    def test_worker_file_to_stats(self):
        conf = nova_like_conf(self, allocation_ratio=4.0)
        path = conf.nova_pinning.summary_file
        agent = service_mod.BindingService(
            runtime_settings.read(conf),
            service_mod.Role(event_loop=False, summary_file=path))
        self.assertTrue(agent.coalescer.request('x', wait=True,
                                                timeout=10))
        self.addCleanup(agent.stop)
        b = summary_mod.basis_from_json(statefile.read_json(path))
        self.assertEqual({'uuid-a': (2, 0, GIB), 'uuid-b': (1, 0, GIB)},
                         {u: tuple(e) for u, e in b.entries.items()})
        # An unchanged host: the file is not written again.
        before = os.stat(path).st_mtime_ns
        self.assertTrue(agent.coalescer.request('y', wait=True,
                                                timeout=10))
        self.assertEqual(before, os.stat(path).st_mtime_ns)
        # nova-compute's side, out of process: the same basis, from the
        # file, read again only when it changed.
        rt = pass_runner(conf, True)
        self.addCleanup(rt.stop)
        self.assertEqual(b, rt.basis())
        reads = []
        real = statefile.read_json
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.statefile.read_json',
            lambda *a, **k: reads.append(a) or real(*a, **k)))
        rt.basis()
        self.assertEqual([], reads)
        self.fake.add_domain('c', 4, xml=hosts.domain_xml('c', 4,
                                                          uuid='uuid-c'),
                             memory_by_node_kib={'0': GIB})
        self.assertTrue(agent.coalescer.request('z', wait=True,
                                                timeout=10))
        self.assertEqual(7, rt.basis().summary.seen)
        self.assertEqual(1, len(reads))

    def test_no_file_no_summary_a_link_refused(self):
        conf = nova_like_conf(self)
        rt = pass_runner(conf, True)
        self.addCleanup(rt.stop)
        self.assertIsNone(rt.basis())
        path = conf.nova_pinning.summary_file
        target = path + '.real'
        with open(target, 'w') as f:
            json.dump({}, f)
        os.symlink(target, path)
        self.assertRaises(OSError, rt.basis)
