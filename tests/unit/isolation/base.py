"""Test case with a fake host and the isolation options pointing at it."""

import os

from oslo_config import cfg
from oslo_config import fixture as config_fixture
import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.isolation import config
from nova_pinning_hooks.isolation import isolator
from nova_pinning_hooks.isolation import restore
from tests.unit.isolation import fakehost


class TestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.host = self.useFixture(fakehost.FakeHost())
        self.conf = cfg.ConfigOpts()
        conf_mod.register_opts(self.conf)
        self.cf = self.useFixture(config_fixture.Config(self.conf))
        self.state_file = os.path.join(self.host.top, 'state',
                                       'isolation.json')
        self.cf.config(group='nova_pinning', reserved_cpus='0',
                       overcommit_file=os.path.join(self.host.top, 'oc'))
        self.cf.config(group='nova_pinning_isolation', cgroup_mode='v1',
                       cgroup_root=self.host.cgroot,
                       state_file=self.state_file, pidfile_dirs=[],
                       # rsyslogd sits in a group the operator allows.
                       move_from_groups=['/', '/system/rsyslog'])
        self.conf([], default_config_files=[])

    def config(self, **kw):
        self.cf.config(group='nova_pinning_isolation', **kw)

    def options(self):
        """The options as configured now (read again at each call: the
        tests change them between steps)."""
        return config.read(self.conf)

    def isolator(self):
        return isolator.Isolator(self.options(), self.host.paths)

    def undo(self):
        return restore.undo(self.options(), self.host.paths)

    def group_file(self, name, group='nova-pinning-host',
                   controller='cpuset'):
        return fakehost.get(os.path.join(
            self.host.group_dir(group, controller), name))
