"""Interrupts and kernel work on one-to-one CPUs as metrics (the work
itself: tests/unit/isolation/test_kernelwork.py)."""

import testtools

from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.observe import passstats
from tests.unit.scrape import value


class TestMetrics(testtools.TestCase):

    def test_gauges(self):
        text = metrics.exposition(metrics.HostView(isolation={
            'state': 'applied', 'mode': 'v1', 'one_to_one_cpus': '4-5',
            'irqs_moved': 7, 'irqs_refused': 2, 'irqs_on_one_to_one': 2,
            'irqs_firing_on_one_to_one': {'40': 3}}), passstats.PassStats())
        for name, expected in (('one_to_one_cpus', 2), ('irqs_moved', 7),
                               ('irqs_unmovable', 2),
                               ('irqs_on_one_to_one', 2),
                               ('irqs_firing_on_one_to_one', 1)):
            self.assertEqual(expected, value(
                text, 'nova_pinning_isolation_' + name), name)
        # Served at zero where isolation is not configured.
        text = metrics.exposition(metrics.HostView(isolation={
            'state': 'not configured'}), passstats.PassStats())
        for name, _ in KERNEL_NAMES:
            self.assertEqual(0, value(text, 'nova_pinning_isolation_' +
                                      name), name)


KERNEL_NAMES = (('one_to_one_cpus', 0), ('irqs_moved', 0),
                ('irqs_unmovable', 0), ('irqs_on_one_to_one', 0),
                ('irqs_firing_on_one_to_one', 0))
