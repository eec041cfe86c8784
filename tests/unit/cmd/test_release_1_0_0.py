"""The files the 1.0.0 release wrote are read by this release.

``tests/data/release-1.0.0/`` holds files made by 1.0.0's own code
(``make.py`` there; its README says how): two overcommit files (nova's
ratio, placement's), two isolation states (cgroup v1 with interrupts,
the workqueue mask and irqbalance; systemd) and the metrics textfile of
``nova-pinning agent``. After an upgrade this release finds them on the
host: each is read by its reader here, by ``nova-pinning-status upgrade
check``, and the textfile still has every series 1.0.0 wrote (the
dashboards and alert rules of 1.0.0 read the new one).
"""

import os
import shutil

import fixtures
from oslo_config import cfg
from oslo_upgradecheck import upgradecheck as oslo_upgradecheck
from prometheus_client import parser as prom_parser
import testtools

from nova_pinning_hooks.cmd import upgradecheck
from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.isolation import config as iso_config
from nova_pinning_hooks.isolation import report
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.observe import textfile
from nova_pinning_hooks.observe import version
from nova_pinning_hooks.runtime import service
from nova_pinning_hooks.runtime import settings as runtime_settings
from tests.fixtures import FakeLibvirtFixture
from tests.unit import hosts
from tests.unit.novaconf import nova_like_conf

Code = oslo_upgradecheck.Code
DATA = os.path.join(os.path.dirname(__file__), '..', '..', 'data',
                    'release-1.0.0')


def data(name):
    return os.path.join(DATA, name)


def series(text):
    """{(sample name, label names)} of a text exposition."""
    return {(s.name, tuple(sorted(s.labels)))
            for family in prom_parser.text_string_to_metric_families(text)
            for s in family.samples}


class TestReaders(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def state_copy(self, name):
        # As the agent leaves it: root's (here: this user's), 0600.
        path = os.path.join(self.tmp, name)
        shutil.copyfile(data(name), path)
        os.chmod(path, 0o600)
        return path

    def test_overcommit_files(self):
        info = overcommitfile.read(data('overcommit.json'))
        self.assertEqual((4.0, '2-7', None, 'compute-1',
                          'cpu_allocation_ratio'),
                         (info.allocation_ratio, info.shared_cpus,
                          info.dedicated_cpus, info.host, info.ratio_source))
        info = overcommitfile.read(data('overcommit-placement.json'))
        self.assertEqual((16.0, '2-5', '6-7', 'placement'),
                         (info.allocation_ratio, info.shared_cpus,
                          info.dedicated_cpus, info.ratio_source))

    def test_isolation_state_v1(self):
        st = state.load(self.state_copy('isolation-v1.json'))
        self.assertEqual(('v1', '0', '2-3'),
                         (st['mode'], st['cpus'], st['one_to_one']))
        self.assertEqual(['100', '101', '104', '700'], sorted(st['moved']))
        self.assertEqual({'original': '0-3', 'set': '0-1'},
                         st['interrupts']['moved']['24'])
        self.assertEqual({'original': '0000000f', 'set': '00000003'},
                         st['workqueue'])
        self.assertEqual('1-3', st['irqbalance']['told'])
        # Written before boot ids were recorded: taken as this boot's.
        self.assertFalse(state.from_earlier_boot(st))

    def test_isolation_state_systemd(self):
        path = self.state_copy('isolation-systemd.json')
        st = state.load(path)
        self.assertEqual({'init.scope': {'AllowedCPUs': ''},
                          'system.slice': {'AllowedCPUs': ''},
                          'user.slice': {'AllowedCPUs': ''}},
                         st['systemd']['previous'])
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        conf([], default_config_files=[])
        conf.set_override('state_file', path, 'nova_pinning_isolation')
        # status, as nova-pinning-isolate status shows it (configuration
        # refused here: no reserved CPUs), from the state alone.
        got = report.status(iso_config.read(conf), iso_config.HostPaths(
            proc=os.path.join(self.tmp, 'proc')))
        self.assertEqual(('applied', 'systemd', '0', 0),
                         (got['state'], got['applied_mode'],
                          got['applied_cpus'], got['recorded_processes']))

    def test_textfile(self):
        self.assertEqual('1.0.0',
                         textfile.written_by(data('nova_pinning.prom')))


class TestTextfileSeries(testtools.TestCase):

    def test_every_series_of_1_0_0_is_still_written(self):
        # The same host as make.py's: one 2-vCPU guest, ratio 4, three
        # passes of the agent.
        fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        fake.add_domain('g', 2, xml=hosts.domain_xml('g', 2))
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova_pinning.prom')
        conf = nova_like_conf(self, metrics_textfile=path,
                              allocation_ratio=4.0)
        svc = service.BindingService(runtime_settings.read(conf),
                                     service.Role(events=False))
        self.addCleanup(svc.stop)
        svc.start()
        for i in range(3):
            self.assertTrue(svc.coalescer.request('t%d' % i, wait=True,
                                                  timeout=30))
        with open(path) as f:
            now = series(f.read())
        with open(data('nova_pinning.prom')) as f:
            then = series(f.read())
        self.assertGreater(len(then), 20)
        self.assertEqual(set(), then - now)


class TestUpgradeCheck(testtools.TestCase):
    """``nova-pinning-status upgrade check`` on the host 1.0.0 left."""

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def checks(self, state_name, overcommit='overcommit.json'):
        state_file = os.path.join(self.tmp, 'isolation.json')
        shutil.copyfile(data(state_name), state_file)
        os.chmod(state_file, 0o600)
        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        conf([], default_config_files=[])
        for name, value in (('overcommit_file', data(overcommit)),
                            ('metrics_textfile',
                             data('nova_pinning.prom'))):
            conf.set_override(name, value, 'nova_pinning')
        conf.set_override('state_file', state_file, 'nova_pinning_isolation')
        return upgradecheck.Checks(conf, iso_config.HostPaths(
            proc=os.path.join(self.tmp, 'proc')))

    def test_every_file_is_read(self):
        for state_name in ('isolation-v1.json', 'isolation-systemd.json'):
            for overcommit in ('overcommit.json',
                               'overcommit-placement.json'):
                checks = self.checks(state_name, overcommit)
                for check in (checks.check_overcommit_file,
                              checks.check_isolation_state,
                              checks.check_isolation_status):
                    result = check()
                    self.assertEqual(Code.SUCCESS, result.code,
                                     result.details)
                result = checks.check_textfile()
                self.assertIn('written by 1.0.0', result.details)
                self.assertEqual(
                    Code.SUCCESS if version.version_string() == '1.0.0'
                    else Code.WARNING, result.code, result.details)

    def test_the_isolation_1_0_0_applied_has_no_status_yet(self):
        # 1.0.0's agent published none: this release's publishes it at
        # its first sweep.
        result = self.checks('isolation-v1.json').check_isolation()
        self.assertEqual(Code.WARNING, result.code)
        self.assertIn('applied (v1, CPUs 0, 4 processes recorded), but the '
                      'agent published no status', result.details)
