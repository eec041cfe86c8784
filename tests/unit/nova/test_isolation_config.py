"""Isolation's configuration against nova's CPU sets, in the overcommit
file as nova writes it (``ratiofile.from_nova_conf``): one clear message,
and nothing changed. The rest of isolation's configuration:
tests/unit/isolation/test_config.py."""

import os

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

    def test_a_stale_overcommit_file_is_refused_not_skipped(self):
        # nova-compute could not rewrite it and set it aside (issue 34
        # R4): nova's present CPU sets are unknown. Issue 40, L-1: the
        # check was skipped and the host confined to CPU 0, a CPU of
        # nova's shared set in the file set aside; refused now, with
        # nothing changed, as an overlap is.
        path = self.conf.nova_pinning.overcommit_file
        overcommitfile.write(path, ratiofile.from_nova_conf(nova_conf('0-3')))
        overcommitfile.set_aside(path)
        message = self.refused('cannot check [nova_pinning] reserved_cpus '
                               'against nova\'s CPU sets')
        self.assertIn('overcommit file %s is stale' % path, message)
        # Stale with sets that do not overlap: refused all the same,
        # since they are not nova's present ones.
        os.unlink(overcommitfile.stale_path(path))
        overcommitfile.write(path, ratiofile.from_nova_conf(nova_conf('1-3')))
        overcommitfile.set_aside(path)
        self.refused('is stale')

    def test_an_unusable_overcommit_file_is_refused(self):
        path = self.conf.nova_pinning.overcommit_file
        with open(path, 'w') as f:
            f.write('{"version": 1, "allocation_ratio": ')
        self.refused('overcommit file %s is corrupt' % path)
        os.unlink(path)
        os.symlink('/nonexistent', path)  # a dangling link: not no nova
        self.refused('symbolic link')

    def test_no_overcommit_file_is_no_nova(self):
        self.assertEqual(frozenset([0]), self.isolator().settings.cpus)
