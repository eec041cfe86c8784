"""Every option has help, and the sample configuration is current."""

import io
import os

from oslo_config import cfg
from oslo_config import generator
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine.policy import options as policy_options
from nova_pinning_hooks.isolation import state as isolation_state

TOP = os.path.join(os.path.dirname(__file__), '..', '..')
SAMPLE = os.path.join(TOP, 'etc', 'nova-pinning-hooks',
                      'nova-pinning-hooks.conf.sample')
# Every option with a value set, and the Enum that names the set.
VALUE_SETS = {
    ('nova_pinning', 'foreign_domains'): policy_options.ForeignDomains,
    ('nova_pinning', 'emulator_threads'): emuthreads.Setting,
    ('nova_pinning_isolation', 'cgroup_mode'): isolation_state.CgroupMode,
}


class TestOptions(testtools.TestCase):

    def test_every_option_has_help(self):
        for group, opts in conf_mod.list_opts():
            for opt in opts:
                self.assertTrue(opt.help, '%s.%s' % (group.name, opt.name))

    def test_every_value_set_is_its_enums(self):
        seen = {}
        for group, opts in conf_mod.list_opts():
            for opt in opts:
                choices = getattr(opt.type, 'choices', None)
                if choices:
                    seen[(group.name, opt.name)] = list(choices)
        self.assertEqual(sorted(VALUE_SETS), sorted(seen),
                         'an option with choices and no Enum, or the '
                         'reverse')
        for key, enum in VALUE_SETS.items():
            self.assertEqual(list(enum.values()), seen[key], key)

    def test_sample_is_generated_from_the_options(self):
        gconf = cfg.ConfigOpts()
        generator.register_cli_opts(gconf)
        gconf(['--config-file', os.path.join(
            TOP, 'etc', 'nova-pinning-hooks', 'config-generator.conf')])
        out = io.StringIO()
        generator.generate(gconf, output_file=out)
        with open(SAMPLE) as f:
            self.assertEqual(f.read(), out.getvalue(),
                             'run: tox -e genconfig')


class TestIsolatedConfigObjects(testtools.TestCase):

    def test_overrides_do_not_leak_between_config_objects(self):
        a, b = cfg.ConfigOpts(), cfg.ConfigOpts()
        for c in (a, b):
            conf_mod.register_opts(c)
            conf_mod.register_opts(c)  # idempotent
            c([], default_config_files=[])
        a.set_override('reserved_cpus', '0-1', 'nova_pinning')
        self.addCleanup(a.clear_override, 'reserved_cpus', 'nova_pinning')
        self.assertEqual('0-1', a.nova_pinning.reserved_cpus)
        self.assertIsNone(b.nova_pinning.reserved_cpus)
