"""Bad configuration: one clear message, and nothing changed. (Against
nova's CPU sets in the overcommit file, as nova writes it:
tests/unit/nova/test_isolation_config.py.)"""

import os

import fixtures

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
