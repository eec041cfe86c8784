"""Prometheus metrics: the exposition of the pass counters. (The
textfile written after each pass: tests/unit/runtime/test_metrics.py
and, in nova-compute, tests/unit/nova/test_metrics.py; ``metrics``,
``top --once`` and the exporter: tests/unit/cmd/test_metrics.py.)"""

import testtools

from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.passes import reconciler
from tests.unit.scrape import value


class TestPassStats(testtools.TestCase):

    def result(self, **kw):
        return reconciler.PassResult(**kw)

    def test_counts_by_outcome_kind_and_result(self):
        from nova_pinning_hooks.engine import plan as plan_mod
        c1 = plan_mod.PinChange('u', 'g', plan_mod.ChangeKind.VCPU, 0, None,
                                frozenset({1}))
        c2 = plan_mod.PinChange('u', 'g', plan_mod.ChangeKind.EMULATOR,
                                None, None, frozenset({1}))
        stats = passstats.PassStats()
        stats.record(self.result(changes=[c1, c2], applied=[c1],
                                 skipped=[(c2, 'busy')],
                                 calls={'read': 4, 'write': 2},
                                 seconds=0.5, error='libvirt: x',
                                 error_kind='failed'), now=1000.0)
        stats.record(self.result(calls={'read': 3}, seconds=0.25))
        stats.record(self.result(error='no ratio', error_kind='input'))
        text = metrics.exposition(metrics.HostView(), stats)
        self.assertEqual(1, value(text, 'nova_pinning_passes_total',
                                  outcome='ok'))
        self.assertEqual(1, value(text, 'nova_pinning_passes_total',
                                  outcome='failed'))
        self.assertEqual(1, value(text, 'nova_pinning_passes_total',
                                  outcome='refused'))
        self.assertEqual(0.75, value(
            text, 'nova_pinning_pass_duration_seconds_sum'))
        self.assertEqual(3, value(
            text, 'nova_pinning_pass_duration_seconds_count'))
        self.assertEqual(1, value(text, 'nova_pinning_pin_changes_total',
                                  result='applied', kind='vcpu'))
        self.assertEqual(1, value(text, 'nova_pinning_pin_changes_total',
                                  result='skipped', kind='emulator'))
        self.assertEqual(7, value(text, 'nova_pinning_libvirt_calls_total',
                                  kind='read'))
        self.assertEqual(0, value(text, 'nova_pinning_last_pass_success'))
        self.assertEqual(0, value(text, 'nova_pinning_vcpu_polls_total'))

    def test_vcpu_count_polls_are_counted_with_their_calls(self):
        stats = passstats.PassStats()
        stats.record(self.result(calls={'read': 3, 'write': 1}))
        stats.record_poll({'read': 5, 'write': 0})
        stats.record_poll({'read': 2})
        text = metrics.exposition(metrics.HostView(), stats)
        self.assertEqual(2, value(text, 'nova_pinning_vcpu_polls_total'))
        self.assertEqual(10, value(text, 'nova_pinning_libvirt_calls_total',
                                   kind='read'))
        self.assertEqual(1, value(text, 'nova_pinning_libvirt_calls_total',
                                  kind='write'))
        self.assertEqual(1, value(text, 'nova_pinning_passes_total',
                                  outcome='ok'))

    def test_last_pass_success_means_every_change_written(self):
        from nova_pinning_hooks.engine import plan as plan_mod
        c = plan_mod.PinChange('u', 'g', plan_mod.ChangeKind.VCPU, 0, None,
                               frozenset({1}))
        stats = passstats.PassStats()
        stats.record(self.result(changes=[c], skipped=[(c, 'busy')]))
        text = metrics.exposition(metrics.HostView(), stats)
        self.assertEqual(1, value(text, 'nova_pinning_passes_total',
                                  outcome='ok'))
        self.assertEqual(0, value(text, 'nova_pinning_last_pass_success'))
        stats.record(self.result(changes=[c], applied=[c]))
        text = metrics.exposition(metrics.HostView(), stats)
        self.assertEqual(1, value(text, 'nova_pinning_last_pass_success'))
