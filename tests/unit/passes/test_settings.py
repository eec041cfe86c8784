"""The passes' configuration edge (``settings.read``; the records of
every layer read together: tests/unit/runtime/test_settings.py); the
ratio and CPU sets a pass reads
(``settings.load``), refused at their edge; the policy's options from
configuration."""

import dataclasses

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import hostsettings
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.passes import settings


def make_conf(test, **values):
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    cf = test.useFixture(config_fixture.Config(conf))
    tmp = test.useFixture(fixtures.TempDir()).path
    cf.config(group='nova_pinning', overcommit_file=tmp + '/oc.json',
              **values)
    return conf


def ratio_of(conf):
    """Where ``conf`` says the ratio comes from (``RatioSource``)."""
    return settings.read(conf).ratio


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
        # doc/source/reference/performance.rst: the measurement behind it.
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        conf([], default_config_files=[])
        self.assertEqual(emuthreads.Setting.SHARED, settings.policy_overrides(
            conf)['emulator_threads'])

    def test_values_come_from_the_configuration(self):
        conf = make_conf(self, foreign_domains='ignore',
                         home_node_min_fraction=0.5, set_home_node=True,
                         emulator_threads='guest')
        expected = {'foreign_domains': 'ignore',
                    'home_node_min_fraction': 0.5,
                    'set_home_node': True,
                    'emulator_threads': 'guest'}
        self.assertEqual(expected, settings.policy_overrides(conf))
        # A pass takes the same from its record.
        self.assertEqual(expected,
                         settings.read(conf).policy_overrides())


class TestLoad(testtools.TestCase):

    def test_the_option_stands_in_for_the_file(self):
        conf = make_conf(self, allocation_ratio=3.0, reserved_cpus='0')
        s = settings.load(ratio_of(conf))
        self.assertIsInstance(s, hostsettings.HostSettings)
        self.assertEqual((3.0, '[nova_pinning] allocation_ratio', '0',
                          None), (s.allocation_ratio, s.ratio_source,
                                  s.reserved_cpus, s.written_at))
        self.assertIsNone(s.nova_sets())  # the file was not read

    def test_the_file(self):
        conf = make_conf(self, reserved_cpus='0')
        path = conf.nova_pinning.overcommit_file
        overcommitfile.write(path, hostsettings.HostSettings(
            8.0, ratio_source='placement', shared_cpus='2-7', host='h',
            written_at='2026-01-01T00:00:00'))
        s = settings.load(ratio_of(conf))
        self.assertEqual(8.0, s.allocation_ratio)
        self.assertEqual(('2-7', None), s.nova_sets())
        self.assertEqual({'allocation_ratio': 8.0,
                          'ratio_source': 'placement',
                          'reserved_cpus': '0', 'shared_cpus': '2-7',
                          'dedicated_cpus': None}, s.snapshot_fields())

    def test_a_file_without_a_source_says_unknown(self):
        conf = make_conf(self)
        # A file of the first shape of version 1 (no ratio_source).
        statefile.write_json(conf.nova_pinning.overcommit_file, {
            'version': 1, 'host': 'h', 'written_at': '2026-01-01T00:00:00',
            'allocation_ratio': 8.0})
        self.assertEqual('unknown',
                         settings.load(ratio_of(conf)).ratio_source)

    def test_refused_with_one_message(self):
        exc = self.assertRaises(settings.SettingsError, settings.load,
                                ratio_of(make_conf(self)))
        self.assertIn('does not exist', str(exc))
        exc = self.assertRaises(settings.SettingsError, settings.load,
                                ratio_of(make_conf(self,
                                                   allocation_ratio=0.0)))
        self.assertIn('must be > 0', str(exc))

    def test_a_bad_ratio_is_refused_at_the_edge(self):
        # (the option's value, refused) for the option's edge; the
        # oslo.config bounds let 0 through, and a record made by hand
        # may hold anything: ``load`` is where it stops.
        table = [(0.0, True), (-1.0, True), (float('nan'), True),
                 (float('inf'), True), (policy.MAX_RATIO * 2, True),
                 (True, True), (1e-9, False), (1.0, False),
                 (policy.MAX_RATIO, False)]
        for ratio, refused in table:
            source = settings.RatioSource(allocation_ratio=ratio,
                                          overcommit_file='/nonexistent',
                                          reserved_cpus=None)
            if refused:
                exc = self.assertRaises(settings.SettingsError,
                                        settings.load, source)
                self.assertIn('[nova_pinning] allocation_ratio', str(exc))
            else:
                self.assertEqual(ratio,
                                 settings.load(source).allocation_ratio)

    def test_a_bad_ratio_in_the_file_is_refused_at_the_edge(self):
        conf = make_conf(self)
        path = conf.nova_pinning.overcommit_file
        for ratio in (0, -2.0, 'four', None, True, 1e300):
            with open(path, 'w') as f:
                f.write('{"version": 1, "allocation_ratio": %s}' % (
                    'null' if ratio is None else
                    'true' if ratio is True else
                    '"four"' if ratio == 'four' else repr(ratio)))
            exc = self.assertRaises(settings.SettingsError,
                                    settings.load, ratio_of(conf))
            self.assertIn('allocation_ratio must be', str(exc))
