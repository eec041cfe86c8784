"""Bad configuration: one clear message, and nothing changed. (Against
nova's CPU sets in the overcommit file, as nova writes it:
tests/unit/nova/test_isolation_config.py.)"""

import dataclasses
import os

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.isolation import config
from tests.unit.isolation import base
from tests.unit.isolation import fakehost


class RefusedTestCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host.typical()

    def refused(self, fragment):
        exc = self.assertRaises(config.ConfigError, self.isolator)
        self.assertIn(fragment, str(exc))
        self.assertEqual(1, len(str(exc).splitlines()))
        self.assertEqual([], self.host.writes)
        self.assertFalse(os.path.exists(self.host.group_dir(
            'nova-pinning-host')))
        self.assertFalse(os.path.exists(self.state_file))
        return str(exc)

    def reserved(self, text):
        self.cf.config(group='nova_pinning', reserved_cpus=text)


class TestRefused(RefusedTestCase):

    def test_reserved_cpus_unset(self):
        self.reserved(None)
        self.refused('reserved_cpus is not set')

    def test_reserved_cpus_blank(self):
        self.reserved('  ')
        self.refused('reserved_cpus is not set')

    def test_reserved_cpus_empty_after_exclusion(self):
        self.reserved('1,^1')
        self.refused('is empty')

    def test_bad_syntax(self):
        self.reserved('0-')
        self.refused('reserved_cpus')

    def test_cpus_the_host_lacks(self):
        self.reserved('2-9')
        self.refused('does not have: 4-9')

    def test_cpus_not_online(self):
        fakehost.put(os.path.join(self.host.paths.cpu_sysfs, 'online'),
                     '0-1\n')
        self.reserved('2')
        self.refused('does not have: 2')

    def test_every_online_cpu(self):
        self.reserved('0-3')
        self.refused('no CPU would be left for guests')

    def test_memory_nodes_not_online(self):
        self.config(memory_nodes='0-1')
        self.refused('memory nodes the host does not have online: 1')

    def test_memory_nodes_bad(self):
        self.config(memory_nodes='x')
        self.refused('memory_nodes')

    def test_memory_limit_too_small(self):
        self.config(memory_limit_mib=64)
        self.refused('below 256 MiB')

    def test_memory_limit_beyond_the_host(self):
        self.config(memory_limit_mib=64 * 1024)
        self.refused("not below the host's memory")

    def test_memory_limit_without_memory_hierarchy(self):
        os.unlink(os.path.join(self.host.roots['memory'],
                               'memory.limit_in_bytes'))
        self.config(memory_limit_mib=1024)
        self.refused('no cgroup v1 memory hierarchy')

    def test_group_names(self):
        for name in ('../etc', 'a/b', 'machine', '.hidden', ''):
            self.config(group_name=name)
            self.refused('group_name')

    def test_unit_names(self):
        for unit, why in (('machine.slice', 'holds the guests'),
                          ('machine-qemu.scope', 'holds the guests'),
                          ('sshd.service', 'not a systemd slice'),
                          ('--now.slice', 'not a systemd slice')):
            self.config(slices=['system.slice', unit])
            self.refused(why)

    def test_relative_paths(self):
        self.config(move_from_groups=['system'])
        self.refused('move_from_groups')
        self.config(move_from_groups=['/'], pidfile_dirs=['run'])
        self.refused('pidfile_dirs')

    def test_v1_without_cpuset_hierarchy(self):
        self.config(cgroup_root=os.path.join(self.host.top, 'nothing'))
        self.refused('no cgroup v1 cpuset hierarchy')

    def test_systemd_without_systemctl(self):
        self.useFixture(fixtures.EnvironmentVariable(
            'PATH', self.host.top))
        self.config(cgroup_mode='systemd')
        self.refused('no systemctl on PATH')


class TestModes(base.TestCase):

    def test_auto_is_v1_without_a_unified_hierarchy(self):
        self.config(cgroup_mode='auto')
        self.assertEqual('v1', self.isolator().settings.mode)

    def test_auto_is_systemd_with_unified_hierarchy_and_systemd(self):
        bin_dir = self.useFixture(fixtures.TempDir()).path
        fakehost.put(os.path.join(bin_dir, 'systemctl'), '#!/bin/sh\n')
        os.chmod(os.path.join(bin_dir, 'systemctl'), 0o755)
        self.useFixture(fixtures.EnvironmentVariable('PATH', bin_dir))
        fakehost.put(os.path.join(self.host.cgroot, 'cgroup.controllers'),
                     'cpuset cpu io memory pids\n')
        self.config(cgroup_mode='auto')
        self.assertEqual('v1', self.isolator().settings.mode)  # no systemd
        os.makedirs(self.host.paths.systemd_run)
        settings = self.isolator().settings
        self.assertEqual(('systemd', os.path.join(bin_dir, 'systemctl')),
                         (settings.mode, settings.systemctl))


class TestRead(testtools.TestCase):
    """``config.read``, the isolation's configuration edge: each field of
    ``Options`` is the option of its name, read once."""

    ISO = conf_mod.ISOLATION_GROUP
    # (field, group, value set, value expected in the record); every
    # value differs from the option's default and from the other rows'
    # of its type, so a field read from another option fails its row.
    TABLE = [
        ('reserved_cpus', 'nova_pinning', '2-3', '2-3'),
        ('reserved_cpus', 'nova_pinning', None, None),
        ('overcommit_file', 'nova_pinning', '/oc.json', '/oc.json'),
        ('cgroup_mode', ISO, 'systemd', 'systemd'),
        ('cgroup_root', ISO, '/cg', '/cg'),
        ('group_name', ISO, 'hostgrp', 'hostgrp'),
        ('memory_limit_mib', ISO, 1024, 1024),
        ('memory_limit_mib', ISO, None, None),
        ('memory_nodes', ISO, '0-1', '0-1'),
        ('memory_nodes', ISO, None, None),
        ('exclude_process_names', ISO, ['sshd', 'cron'], ('sshd', 'cron')),
        ('pidfile_dirs', ISO, ['/pids'], ('/pids',)),
        ('sweep_interval', ISO, 7, 7),
        ('status_timeout', ISO, 2.5, 2.5),
        ('slices', ISO, ['a.slice'], ('a.slice',)),
        ('move_from_groups', ISO, ['/from'], ('/from',)),
        ('only_descendants_of', ISO, 4242, 4242),
        ('only_descendants_of', ISO, None, None),
        ('interrupts', ISO, False, False),
        ('workqueues', ISO, False, False),
        ('interrupt_sample_seconds', ISO, 0.25, 0.25),
        ('state_file', ISO, '/iso.json', '/iso.json'),
    ]

    def conf(self, group=None, name=None, value=None):
        """A configuration with one option set (``name`` in ``group``)."""
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        cf = self.useFixture(config_fixture.Config(conf))
        if name is not None:
            cf.config(group=group, **{name: value})
        conf([], default_config_files=[])
        return conf

    def test_each_field_is_its_option(self):
        for field, group, value, expected in self.TABLE:
            options = config.read(self.conf(group, field, value))
            self.assertEqual(expected, getattr(options, field),
                             '%s from [%s] %s' % (field, group, field))

    def test_the_table_covers_every_field(self):
        self.assertEqual({f.name for f in dataclasses.fields(config.Options)},
                         {row[0] for row in self.TABLE})

    def test_every_isolation_option_is_a_field(self):
        # An option added to [nova_pinning_isolation] is read here or
        # nowhere: the modules below are never handed ``conf``.
        fields = {f.name for f in dataclasses.fields(config.Options)}
        self.assertEqual(set(), {opt.name for opt in conf_mod.isolation_opts}
                         - fields)

    def test_frozen_and_read_once(self):
        conf = self.conf(self.ISO, 'sweep_interval', 9)
        options = config.read(conf)
        conf.set_override('sweep_interval', 1, group=self.ISO)
        self.assertEqual(9, options.sweep_interval)
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          options, 'sweep_interval', 1)

    def test_lists_are_tuples(self):
        # Frozen all the way down: oslo.config's lists become tuples.
        options = config.read(self.conf())
        for name in ('exclude_process_names', 'pidfile_dirs', 'slices',
                     'move_from_groups'):
            self.assertIsInstance(getattr(options, name), tuple, name)
