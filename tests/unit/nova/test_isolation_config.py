"""Isolation's configuration against nova's CPU sets, in the overcommit
file as nova writes it (``ratiofile.from_nova_conf``): one clear message,
and nothing changed. The rest of isolation's configuration:
tests/unit/isolation/test_config.py."""

import fixtures

from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.nova import ratiofile
from tests.unit.isolation.test_config import RefusedTestCase


def nova_conf(shared=None, dedicated=None):
    compute = type('Compute', (), {'cpu_shared_set': shared,
                                   'cpu_dedicated_set': dedicated})
    return type('NovaConf', (), {
        'cpu_allocation_ratio': 4.0, 'initial_cpu_allocation_ratio': 4.0,
        'reserved_host_cpus': 0, 'vcpu_pin_set': None, 'host': 'h',
        'compute': compute})


class TestRefused(RefusedTestCase):

    def test_overlap_with_nova_shared_set(self):
        overcommitfile.write(self.conf.nova_pinning.overcommit_file,
                         ratiofile.from_nova_conf(nova_conf('0-3')))
        self.refused("overlaps nova's cpu_shared_set (0-3)")

    def test_overlap_with_nova_dedicated_set(self):
        overcommitfile.write(self.conf.nova_pinning.overcommit_file,
                         ratiofile.from_nova_conf(nova_conf('1-2', '0,3')))
        self.refused("overlaps nova's cpu_dedicated_set")

    def test_no_overlap_is_accepted(self):
        overcommitfile.write(self.conf.nova_pinning.overcommit_file,
                         ratiofile.from_nova_conf(nova_conf('1-3')))
        self.assertEqual(frozenset([0]), self.isolator().settings.cpus)

    def test_a_stale_overcommit_file_is_said_not_checked_against(self):
        # nova-compute could not rewrite it and set it aside (issue 34
        # R4): its CPU sets are not this nova-compute's.
        path = self.conf.nova_pinning.overcommit_file
        overcommitfile.write(path, ratiofile.from_nova_conf(nova_conf('0-3')))
        overcommitfile.set_aside(path)
        logs = self.useFixture(fixtures.FakeLogger())
        self.assertEqual(frozenset([0]), self.isolator().settings.cpus)
        self.assertIn('overcommit file %s is stale' % path, logs.output)
