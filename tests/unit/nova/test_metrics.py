"""Prometheus metrics in nova-compute: the textfile written after each
pass of its pass thread, and the overcommit file opened once for a
scrape or a pass. (The exposition: tests/unit/observe/test_metrics.py.)
"""

import os
import stat
import threading
import time

import fixtures
import testtools

from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.isolation import BackendError
from nova_pinning_hooks.isolation import systemdbus
from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.observe import metrics
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from nova_pinning_hooks.observe import settings as observe_settings
from tests.fixtures import FakeLibvirtFixture
from tests.fixtures import pass_runner
from tests.unit import hosts
from tests.unit.novaconf import nova_like_conf
from tests.unit.scrape import samples
from tests.unit.scrape import value


class OneGuestCase(testtools.TestCase):
    """One 2-vCPU guest on the fake small host; a textfile path."""

    def setUp(self):
        super().setUp()
        self.addCleanup(activation.deactivate)
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        self.fake.add_domain('g', 2, xml=hosts.domain_xml('g', 2))
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(self.dir, 'nova_pinning.prom')


class TestTextfileInNovaCompute(OneGuestCase):

    def run_passes(self, conf, n):
        a = pass_runner(conf, False)
        self.addCleanup(a.stop)
        a.ratio_file.write()
        for i in range(n):
            self.assertTrue(a.coalescer.request('t%d' % i, wait=True,
                                                timeout=30))
        return a

    def test_written_after_each_pass(self):
        conf = nova_like_conf(self, metrics_textfile=self.path)
        os.umask(0o077)  # the mode is explicit, whatever the umask
        self.addCleanup(os.umask, 0o022)
        a = self.run_passes(conf, 2)
        self.assertIsNone(a.last_result.error)
        with open(self.path) as f:
            text = f.read()
        self.assertEqual(0o644, stat.S_IMODE(os.stat(self.path).st_mode))
        self.assertEqual(2, value(text, 'nova_pinning_passes_total',
                                  outcome='ok'))
        self.assertEqual(1, value(text, 'nova_pinning_guests',
                                  mode='dedicated', node='0'))
        self.assertEqual(2, len([k for k in samples(text) if k[0] ==
                                 'nova_pinning_vcpu_delay_seconds_total']))
        self.assertEqual(1, value(text, 'nova_pinning_up'))
        self.assertEqual([], [n for n in os.listdir(self.dir)
                              if n.endswith('.tmp')])

    def test_failure_is_a_warning_never_a_failed_pass(self):
        missing = os.path.join(self.dir, 'no-such-dir', 'x.prom')
        conf = nova_like_conf(self, metrics_textfile=missing)
        logs = self.useFixture(fixtures.FakeLogger())
        a = self.run_passes(conf, 1)
        self.assertIsNone(a.last_result.error)
        self.assertIn('metrics not written', logs.output)
        self.assertFalse(os.path.exists(missing))

    def test_off_by_default(self):
        conf = nova_like_conf(self)
        a = self.run_passes(conf, 1)
        self.assertEqual(1, a.pass_metrics.stats.passes['ok'])
        self.assertEqual([], os.listdir(self.dir))


class TestTheOvercommitFileOpenedOnce(OneGuestCase):
    """A scrape, and a pass with its textfile, open the overcommit file
    once: the settings read then serve the plan, the ratio's source, the
    isolation state (nova's CPU sets) and the file's times. Counted where
    the file is opened: every read of it goes through
    ``statefile.read_json`` with its path."""

    def setUp(self):
        super().setUp()
        # reserved_cpus set: the isolation state checks it against
        # nova's CPU sets, which are in the file.
        self.conf = nova_like_conf(self, reserved_cpus='0',
                                   metrics_textfile=self.path)
        self.runtime = pass_runner(self.conf, False)
        self.addCleanup(self.runtime.stop)
        self.assertTrue(self.runtime.ratio_file.write())
        path = self.conf.nova_pinning.overcommit_file
        read_json = statefile.read_json
        self.opened = []

        def counting(p, *args, **kwargs):
            if p == path:
                self.opened.append(p)
            return read_json(p, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.statefile.read_json', counting))

    def test_a_scrape(self):
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(rec.close)
        view = metrics.read_view(rec, observe_settings.read(self.conf))
        self.assertEqual([], view.errors)
        self.assertIn('state', view.isolation)
        self.assertGreater(view.overcommit['written'], 0)
        self.assertEqual(1, len(self.opened))
        del self.opened[:]
        text = metrics.LiveCollector(
            rec, observe_settings.read(self.conf)).render().decode()
        self.assertEqual(1, value(text, 'nova_pinning_up'))
        self.assertEqual(1, len(self.opened))

    def test_a_pass_and_its_textfile(self):
        self.assertTrue(self.runtime.coalescer.request('t', wait=True,
                                                       timeout=30))
        self.assertIsNone(self.runtime.last_result.error)
        self.assertTrue(os.path.exists(
            self.conf.nova_pinning.metrics_textfile))
        self.assertEqual(1, len(self.opened))


class HangingBus:
    """A system bus that takes every call and answers none within 5 s
    (as a hung dbus-daemon or systemd); records who called."""

    def __init__(self, path, calls, release):
        self.path, self.calls, self.release = path, calls, release

    def call(self, msg, *args, **kwargs):
        self.calls.append(threading.current_thread().name)
        self.release.wait(5)
        raise BackendError('no reply within 5 s')


class TestThePassThreadNeverAsksSystemd(OneGuestCase):
    """issue 40, M-1: the textfile written after each pass on
    nova-compute's pass thread read the isolation state from systemd, 16
    D-Bus calls of up to 30 s each: with a hung bus no pass ran for
    minutes. Now it reads the status the isolation agent published."""

    def setUp(self):
        super().setUp()
        self.conf = nova_like_conf(self, reserved_cpus='0',
                                   metrics_textfile=self.path)
        # Isolation through systemd over D-Bus (no systemctl), on a
        # unified hierarchy with cpuset: everything systemd needs.
        cgroot = os.path.join(self.dir, 'cgroup')
        os.makedirs(cgroot)
        with open(os.path.join(cgroot, 'cgroup.controllers'), 'w') as f:
            f.write('cpuset cpu memory\n')
        self.state_file = os.path.join(self.dir, 'state', 'isolation.json')
        for name, v in (('cgroup_mode', 'systemd'), ('cgroup_root', cgroot),
                        ('state_file', self.state_file),
                        ('interrupt_sample_seconds', 0.0)):
            self.conf.set_override(name, v, group='nova_pinning_isolation')
        self.calls, release = [], threading.Event()
        self.addCleanup(release.set)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.config.systemd_access',
            lambda paths=None: (None, systemdbus.Sockets(
                os.path.join(self.dir, 'bus'),
                os.path.join(self.dir, 'private')))))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.systemdbus.Bus',
            lambda path, private=None: HangingBus(path, self.calls,
                                                  release)))

    def test_a_pass_and_its_textfile_with_a_hung_bus(self):
        # What the agent published after its last sweep (statusfile's
        # format, written here as the agent does).
        statefile.write_json(
            os.path.join(self.dir, 'state', 'isolation.status.json'),
            {'version': 1, 'written': time.time(),
             'boottime': time.clock_gettime(time.CLOCK_BOOTTIME),
             'sweep_interval': 30,
             'status': {'state': 'applied', 'mode': 'systemd',
                        'confined': 3, 'not_confined': 0}})
        a = pass_runner(self.conf, False)
        self.addCleanup(a.stop)
        a.ratio_file.write()
        start = time.monotonic()
        self.assertTrue(a.coalescer.request('t', wait=True, timeout=60))
        took = time.monotonic() - start
        self.assertIsNone(a.last_result.error)
        self.assertEqual([], self.calls)
        self.assertLess(took, 3.0)
        with open(self.path) as f:
            text = f.read()
        self.assertEqual(3, value(text, 'nova_pinning_isolation_'
                                        'confined_units'))
        self.assertEqual(1, value(text, 'nova_pinning_isolation_applied',
                                  mode='systemd'))
        self.assertEqual(0, value(text, 'nova_pinning_isolation_'
                                        'status_stale'))
        self.assertGreater(value(text, 'nova_pinning_isolation_status_'
                                       'timestamp_seconds'), 0)

    def test_a_scrape_with_a_hung_bus(self):
        rec = reconciler.Reconciler(settings_mod.read(self.conf))
        self.addCleanup(rec.close)
        start = time.monotonic()
        text = metrics.LiveCollector(
            rec, observe_settings.read(self.conf)).render().decode()
        self.assertLess(time.monotonic() - start, 3.0)
        self.assertEqual([], self.calls)
        # Nothing published: not applied, 0, not stale.
        self.assertEqual(0, value(text, 'nova_pinning_isolation_applied',
                                  mode='none'))
