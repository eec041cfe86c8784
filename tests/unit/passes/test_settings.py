"""The settings a pass reads: the ratio and CPU sets (once a pass), and
the policy's options from configuration."""

import dataclasses

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.passes import settings


def make_conf(test, **values):
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    cf = test.useFixture(config_fixture.Config(conf))
    tmp = test.useFixture(fixtures.TempDir()).path
    cf.config(group='nova_pinning', overcommit_file=tmp + '/oc.json',
              **values)
    return conf


class TestPolicyOverrides(testtools.TestCase):

    def test_every_policy_option_is_an_option_of_the_package(self):
        # A field of policy.Options that is neither in the snapshot nor a
        # [nova_pinning] option would make every pass fail: name it here.
        names = {o.name for group, opts in conf_mod.list_opts()
                 if getattr(group, 'name', group) == conf_mod.PINNING_GROUP
                 for o in opts}
        fields = {f.name for f in dataclasses.fields(policy.Options)}
        self.assertEqual(set(), fields - settings.FROM_SNAPSHOT - names)
        self.assertLessEqual(settings.FROM_SNAPSHOT, fields)

    def test_emulator_threads_default_is_shared(self):
        # doc/source/performance.rst: the measurement behind it.
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        conf([], default_config_files=[])
        self.assertEqual(emuthreads.SHARED, settings.policy_overrides(
            conf)['emulator_threads'])

    def test_values_come_from_the_configuration(self):
        conf = make_conf(self, foreign_domains='ignore',
                         home_node_min_fraction=0.5, set_home_node=True,
                         emulator_threads='guest')
        self.assertEqual({'foreign_domains': 'ignore',
                          'home_node_min_fraction': 0.5,
                          'set_home_node': True,
                          'emulator_threads': 'guest'},
                         settings.policy_overrides(conf))


class TestLoad(testtools.TestCase):

    def test_the_option_stands_in_for_the_file(self):
        conf = make_conf(self, allocation_ratio=3.0, reserved_cpus='0')
        s = settings.load(conf)
        self.assertEqual((3.0, '[nova_pinning] allocation_ratio', '0',
                          None), (s.allocation_ratio, s.ratio_source,
                                  s.reserved_cpus, s.written_at))
        self.assertIsNone(s.nova_sets())  # the file was not read

    def test_the_file(self):
        conf = make_conf(self)
        path = conf.nova_pinning.overcommit_file
        overcommitfile.write(path, {
            'version': 1, 'host': 'h', 'written_at': '2026-01-01T00:00:00',
            'allocation_ratio': 8.0, 'ratio_source': 'placement',
            'shared_cpus': '2-7', 'dedicated_cpus': None})
        s = settings.load(conf)
        self.assertEqual(8.0, s.allocation_ratio)
        self.assertEqual(('2-7', None), s.nova_sets())
        self.assertEqual({'allocation_ratio': 8.0,
                          'ratio_source': 'placement',
                          'reserved_cpus': None, 'shared_cpus': '2-7',
                          'dedicated_cpus': None}, s.snapshot_fields())

    def test_refused_with_one_message(self):
        exc = self.assertRaises(settings.SettingsError, settings.load,
                                make_conf(self))
        self.assertIn('does not exist', str(exc))
        exc = self.assertRaises(settings.SettingsError, settings.load,
                                make_conf(self, allocation_ratio=0.0))
        self.assertIn('must be > 0', str(exc))
