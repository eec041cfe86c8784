"""The libvirt adapter on the fake libvirt: calls counted, faults handled."""

import os
import time

import fixtures
import testtools

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.host import libvirtapi
from nova_pinning_hooks.host import virt
from nova_pinning_hooks.host import virtread
from tests import fakelibvirt
from tests.fixtures import FakeLibvirtFixture
from tests.unit import hosts
from tests.fixtures import host_options

S = cpuset.parse


def change(dom, kind, new, index=None, old=None):
    return plan_mod.PinChange(dom.UUIDString(), dom.name(), kind, index,
                              old, S(new))


class AdapterTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.fake = self.useFixture(
            FakeLibvirtFixture(hosts.load('small-1node'))).host
        self.adapter = virt.Host('qemu:///system', host_options())
        self.adapter.busy_retry_delay = 0


class TestRead(AdapterTestCase):

    def test_one_listing_one_xml_per_domain(self):
        for i in range(3):
            self.fake.add_domain('g%d' % i, 2)
        self.fake.add_domain('off', 1, active=False)
        snap = self.adapter.read_snapshot()
        self.assertEqual(3, len(snap.domains))
        self.assertEqual({'0': 65536}, snap.domains[0][
            'memory_by_node_kib'])
        self.assertEqual(1, self.fake.calls['listAllDomains'])
        self.assertEqual(3, self.fake.calls['XMLDesc'])
        self.adapter.read_snapshot()
        # Capabilities are read once per connection.
        self.assertEqual(1, self.fake.calls['getCapabilities'])
        self.assertEqual(1 + 1 + 2 + 6, self.adapter.calls['read'])

    def test_domain_gone_between_list_and_read_is_skipped(self):
        g = self.fake.add_domain('g', 1)
        self.fake.add_domain('h', 1)
        original = fakelibvirt.FakeDomain.XMLDesc

        def vanish(dom, flags=0):
            if dom is g:
                g.destroy()
            return original(dom, flags)
        self.useFixture(fixtures.MonkeyPatch(
            'tests.fakelibvirt.FakeDomain.XMLDesc', vanish))
        snap = self.adapter.read_snapshot()
        self.assertEqual(1, len(snap.domains))

    def test_connection_lost_is_reopened(self):
        self.fake.add_domain('g', 1)
        self.adapter.read_snapshot()
        fakelibvirt.drop_connections(self.fake)
        snap = self.adapter.read_snapshot()
        self.assertEqual(1, len(snap.domains))
        self.assertEqual(2, self.fake.calls['open'])

    def test_the_connection_offers_credentials_from_auth_conf(self):
        # libvirtd with SASL on TCP (kolla-ansible's default): libvirt
        # fills the credentials from its auth.conf, but only those the
        # connection offers; libvirt.open offers none ("No worthy mechs
        # found" against the kolla layout's libvirtd, issue 40, L-4).
        # What auth.conf lacks is asked of nobody: refused.
        self.adapter.read_snapshot()
        self.assertEqual(1, len(self.fake.auths))
        credtypes, callback, flags = self.fake.auths[0]
        for cred in (fakelibvirt.VIR_CRED_AUTHNAME,
                     fakelibvirt.VIR_CRED_PASSPHRASE):
            self.assertIn(cred, credtypes)
        self.assertEqual(-1, callback(
            [[fakelibvirt.VIR_CRED_AUTHNAME, 'name', '', '', None]], None))
        self.assertEqual(0, flags)

    def test_daemon_down_raises_for_the_pass_to_report(self):
        self.fake.down = True
        self.assertRaises(fakelibvirt.libvirtError,
                          self.adapter.read_snapshot)


class TestPinnedGuests(AdapterTestCase):
    """The guests whose live XML carries pins their definition lacks
    (``nova-pinning-status upgrade check``): read-only, bounded."""

    def test_live_only_pins_are_found_nova_s_are_not(self):
        pinned = self.fake.add_domain('pinned', 2)
        self.adapter.apply([change(pinned, 'vcpu', '1', 0),
                            change(pinned, 'emulator', '0-1')])
        self.fake.add_domain('fresh', 2)
        # nova-placed: nova defined its pins, the live XML has the same.
        self.fake.add_domain('placed', 1, xml=hosts.domain_xml(
            'placed', 1, pins={0: '3'}, numa_cells=True))
        self.fake.add_domain('off', 1, active=False)
        writes = self.fake.writes()
        before = dict(self.fake.calls)
        found = self.adapter.pinned_guests()
        self.assertEqual(['pinned'], sorted(found))
        # (as the fake prints them: libvirt writes ranges, 0-1)
        self.assertEqual(['<emulatorpin cpuset="0,1"></emulatorpin>',
                          '<vcpupin cpuset="1" vcpu="0"></vcpupin>'],
                         found['pinned'])
        self.assertEqual(writes, self.fake.writes())  # nothing written
        # A listing and two reads a running guest (live, persistent).
        self.assertEqual(1, self.fake.calls['listAllDomains'] -
                         before.get('listAllDomains', 0))
        self.assertEqual(6, self.fake.calls['XMLDesc'] -
                         before.get('XMLDesc', 0))

    def test_a_pin_release_wrote_is_still_one_of_ours(self):
        # release puts a guest back on nova's CPUs: the live XML lists
        # the pin all the same, and nova would carry it.
        g = self.fake.add_domain('g', 1)
        self.adapter.apply([change(g, 'vcpu', '0-3', 0)])
        self.assertEqual({'g': ['<vcpupin cpuset="0,1,2,3" vcpu="0">'
                                '</vcpupin>']}, self.adapter.pinned_guests())

    def test_home_node_is_one_of_ours(self):
        g = self.fake.add_domain('g', 1)
        self.adapter.set_home_node = True
        self.adapter.apply([change(g, 'numa', '0')])
        self.assertEqual(['g'], list(self.adapter.pinned_guests()))

    def test_a_transient_domain_has_no_definition_to_compare(self):
        # libvirt answers its inactive read with the live XML; nova
        # defines every guest it runs.
        t = self.fake.add_domain('t', 1, persistent=False)
        self.adapter.apply([change(t, 'vcpu', '1', 0)])
        self.assertEqual({}, self.adapter.pinned_guests())

    def test_a_guest_gone_meanwhile_is_skipped(self):
        g = self.fake.add_domain('g', 1)
        h = self.fake.add_domain('h', 1)
        self.adapter.apply([change(g, 'vcpu', '1', 0),
                            change(h, 'vcpu', '1', 0)])
        original = fakelibvirt.FakeDomain.XMLDesc

        def vanish(dom, flags=0):
            text = original(dom, flags)
            if dom is g:
                g.destroy()  # between its live and its persistent read
            return text
        self.useFixture(fixtures.MonkeyPatch(
            'tests.fakelibvirt.FakeDomain.XMLDesc', vanish))
        self.assertEqual(['h'], list(self.adapter.pinned_guests()))

    def test_a_hung_daemon_is_a_bounded_failure(self):
        self.fake.add_domain('g', 1)
        release = fakelibvirt.threading.Event()
        self.addCleanup(release.set)
        self.fake.hang['XMLDesc'] = release
        self.adapter.call_timeout = 0.2
        start = time.monotonic()
        self.assertRaises(libvirtapi.LibvirtTimeout,
                          self.adapter.pinned_guests)
        self.assertLess(time.monotonic() - start, 5)


class TestApply(AdapterTestCase):

    def test_each_change_is_one_live_write(self):
        g = self.fake.add_domain('g', 2)
        result = self.adapter.apply([
            change(g, 'vcpu', '1', 0), change(g, 'vcpu', '2', 1),
            change(g, 'emulator', '1-2')])
        self.assertEqual(3, len(result.applied))
        self.assertEqual([], result.skipped)
        self.assertEqual({0: (1,), 1: (2,)}, g.vcpu_pins)
        self.assertEqual((1, 2), g.emulator_pin)
        self.assertEqual(3, self.adapter.calls['write'])
        self.assertEqual(1, self.fake.calls['lookupByUUIDString'])
        self.assertIn("<vcpupin vcpu='1' cpuset='2'/>", g.XMLDesc())

    def test_numa_only_when_configured(self):
        g = self.fake.add_domain('g', 1)
        result = self.adapter.apply([change(g, 'numa', '0')])
        self.assertEqual(0, self.adapter.calls['write'])
        self.assertEqual([], result.applied)
        self.adapter.set_home_node = True
        self.adapter.apply([change(g, 'numa', '0')])
        self.assertEqual('0', g.numa_nodeset)

    def test_domain_vanishes_before_pin(self):
        g = self.fake.add_domain('g', 2)
        h = self.fake.add_domain('h', 1)
        self.fake.vanish_on_pin.add('g')
        result = self.adapter.apply([
            change(g, 'vcpu', '1', 0), change(g, 'vcpu', '2', 1),
            change(h, 'vcpu', '3', 0)])
        self.assertEqual([h.name()], [c.name for c in result.applied])
        self.assertEqual(2, len(result.skipped))
        self.assertIn('went away', result.skipped[0][1])

    def test_domain_gone_before_lookup(self):
        g = self.fake.add_domain('g', 1)
        g.destroy()
        result = self.adapter.apply([change(g, 'vcpu', '1', 0)])
        self.assertEqual(1, len(result.skipped))

    def test_busy_domain_retried_then_written(self):
        g = self.fake.add_domain('g', 1)
        self.fake.busy['g'] = 2
        result = self.adapter.apply([change(g, 'vcpu', '3', 0)])
        self.assertEqual(1, len(result.applied))
        self.assertEqual(3, self.fake.calls['pinVcpuFlags'])

    def test_busy_domain_gives_up_after_bounded_retries(self):
        g = self.fake.add_domain('g', 2)
        self.fake.busy['g'] = 100
        result = self.adapter.apply([change(g, 'vcpu', '3', 0),
                                     change(g, 'vcpu', '2', 1)])
        self.assertEqual(2, len(result.skipped))
        self.assertEqual(2 * (1 + self.adapter.busy_retries),
                         self.fake.calls['pinVcpuFlags'])

    def test_connection_lost_mid_apply_reopens_and_finishes(self):
        g = self.fake.add_domain('g', 2)
        original = fakelibvirt.FakeDomain.pinVcpuFlags
        state = {'dropped': False}

        def drop_once(dom, vcpu, cpumap, flags):
            if vcpu == 1 and not state['dropped']:
                state['dropped'] = True
                fakelibvirt.drop_connections(self.fake)
                self.fake.down = True
                try:
                    dom._host.count('pinVcpuFlags')
                finally:
                    self.fake.down = False
            return original(dom, vcpu, cpumap, flags)
        self.useFixture(fixtures.MonkeyPatch(
            'tests.fakelibvirt.FakeDomain.pinVcpuFlags', drop_once))
        result = self.adapter.apply([change(g, 'vcpu', '1', 0),
                                     change(g, 'vcpu', '2', 1)])
        self.assertEqual(2, len(result.applied), result.skipped)
        self.assertEqual({0: (1,), 1: (2,)}, g.vcpu_pins)
        self.assertEqual(2, self.fake.calls['open'])

    def test_domains_of_the_listing_are_written_without_a_lookup(self):
        g, h = self.fake.add_domain('g', 1), self.fake.add_domain('h', 1)
        self.adapter.read_snapshot()
        result = self.adapter.apply([change(g, 'vcpu', '1', 0),
                                     change(h, 'vcpu', '2', 0)])
        self.assertEqual(2, len(result.applied))
        self.assertEqual(0, self.fake.calls['lookupByUUIDString'])
        # A connection opened since: its own domain objects are looked up.
        fakelibvirt.drop_connections(self.fake)
        result = self.adapter.apply([change(g, 'vcpu', '3', 0)])
        self.assertEqual(1, len(result.applied), result.skipped)
        self.assertEqual(1, self.fake.calls['lookupByUUIDString'])

    def test_a_guest_still_starting_is_left_for_later_not_waited_for(self):
        # libvirt lists a domain as active as soon as its qemu runs, while
        # its start job still holds it (seconds, in a burst of boots); a
        # pin call would wait for that job. Nothing waits: the others are
        # written, the starting one is skipped until it has started.
        self.adapter.call_timeout = 1.0
        s = self.fake.add_domain('s', 1, starting=True)
        self.addCleanup(lambda: s.job and s.job.set())
        g = self.fake.add_domain('g', 1)
        result = self.adapter.apply([change(s, 'vcpu', '1', 0),
                                     change(s, 'emulator', '1'),
                                     change(g, 'vcpu', '2', 0)])
        self.assertEqual([], result.error)
        self.assertEqual(['g'], [c.name for c in result.applied])
        self.assertEqual(2, len(result.skipped))
        self.assertIn('starting up', result.skipped[0][1])
        self.assertEqual(1, self.fake.calls['pinVcpuFlags'])  # g's only
        s.finish_start()
        result = self.adapter.apply([change(s, 'vcpu', '1', 0)])
        self.assertEqual(['s'], [c.name for c in result.applied])
        self.assertEqual({0: (1,)}, s.vcpu_pins)

    def test_a_running_guest_in_a_migration_job_holds_up_no_one(self):
        # The source of a live migration runs until its switch-over
        # (minutes for a large guest) while libvirt's migration job holds
        # it: a pin call waits for that job. Issue 34 R3: every pass
        # blocked in pinVcpuFlags on it and stopped, the other guests'
        # changes with it. It is left as it is, the others are written.
        self.adapter.call_timeout = 1.0
        a = self.fake.add_domain('a', 1)
        a.start_job()
        self.addCleanup(lambda: a.job and a.job.set())
        b = self.fake.add_domain('b', 1)
        started = time.monotonic()
        result = self.adapter.apply([change(a, 'vcpu', '1', 0),
                                     change(a, 'emulator', '1'),
                                     change(b, 'vcpu', '2', 0)])
        self.assertLess(time.monotonic() - started, 0.5)
        self.assertEqual([], result.error)
        self.assertEqual(['b'], [c.name for c in result.applied])
        self.assertEqual({a.UUIDString()}, result.held)
        self.assertEqual(2, len(result.skipped))
        self.assertIn('migrating', result.skipped[0][1])
        self.assertEqual(({}, {0: (2,)}), (a.vcpu_pins, b.vcpu_pins))
        # The state of the paused ones in one call, the job of each
        # guest to be written in one call each; no write to a.
        self.assertEqual((1, 2, 1), (self.fake.calls['getAllDomainStats'],
                                     self.fake.calls['jobStats'],
                                     self.fake.calls['pinVcpuFlags']))
        self.assertEqual(2, self.adapter.calls['jobStats'])
        a.end_job()
        result = self.adapter.apply([change(a, 'vcpu', '1', 0)])
        self.assertEqual((['a'], []), ([c.name for c in result.applied],
                                       result.skipped))
        self.assertEqual({0: (1,)}, a.vcpu_pins)

    def test_a_running_guest_migrating_in_is_left_for_later(self):
        # The destination of a post-copy migration runs while the
        # incoming job holds it; libvirt refuses its jobStats ("only on
        # the source host"): held all the same.
        result = self.apply_beside_a_job(
            fakelibvirt.VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN)
        self.assertIn('migrating in', result.skipped[0][1])

    def apply_beside_a_job(self, operation, **job):
        """Guest a in a job of libvirt's, b with a change of its own: b is
        written, a left (its write would wait for the job's end)."""
        self.adapter.call_timeout = 1.0
        a = self.fake.add_domain('a', 1)
        a.start_job(operation, **job)
        self.addCleanup(lambda: a.job and a.job.set())
        b = self.fake.add_domain('b', 1)
        result = self.adapter.apply([change(a, 'vcpu', '1', 0),
                                     change(b, 'vcpu', '2', 0)])
        self.assertEqual(([], ['b']), (result.error,
                                       [c.name for c in result.applied]))
        return result

    def test_a_job_completed_in_qemu_still_holds_the_guest(self):
        # Seen on the real libvirtd (reference/security.rst): a live dump read
        # 'type': completed while libvirt still wrote it out, its job
        # still there.
        result = self.apply_beside_a_job(
            fakelibvirt.VIR_DOMAIN_JOB_OPERATION_DUMP,
            kind=fakelibvirt.VIR_DOMAIN_JOB_COMPLETED)
        self.assertIn('being dumped', result.skipped[0][1])

    def test_a_guest_whose_job_read_fails_is_written(self):
        # A driver without jobStats: written as before (its write says
        # what else may be wrong).
        g = self.fake.add_domain('g', 1)

        def refused(dom, flags=0):
            raise fakelibvirt.libvirtError('this function is not '
                                           'supported by the connection '
                                           'driver', 3)
        self.useFixture(fixtures.MonkeyPatch(
            'tests.fakelibvirt.FakeDomain.jobStats', refused))
        result = self.adapter.apply([change(g, 'vcpu', '1', 0)])
        self.assertEqual((['g'], []), ([c.name for c in result.applied],
                                       result.error))

    def test_a_guest_paused_by_a_client_is_written(self):
        # nova starts a guest paused and resumes it once its network is
        # plugged: no job holds it meanwhile, so it is pinned before it
        # runs. One call reads the state of every paused domain.
        g = self.fake.add_domain('g', 1)
        p = self.fake.add_domain('p', 1)
        p.state_reason = (fakelibvirt.VIR_DOMAIN_PAUSED,
                          fakelibvirt.VIR_DOMAIN_PAUSED_USER)
        result = self.adapter.apply([change(g, 'vcpu', '1', 0),
                                     change(p, 'vcpu', '2', 0)])
        self.assertEqual(['g', 'p'], [c.name for c in result.applied])
        self.assertEqual(1, self.fake.calls['getAllDomainStats'])

    def test_states_unread_the_writes_are_made_all_the_same(self):
        g = self.fake.add_domain('g', 1)

        def refused(conn, stats=0, flags=0):
            raise fakelibvirt.libvirtError('unsupported flags',
                                           fakelibvirt.VIR_ERR_INVALID_ARG)
        self.useFixture(fixtures.MonkeyPatch(
            'tests.fakelibvirt.FakeConnection.getAllDomainStats', refused))
        result = self.adapter.apply([change(g, 'vcpu', '1', 0)])
        self.assertEqual((['g'], [], []), ([c.name for c in result.applied],
                                           result.skipped, result.error))

    def test_cpumap_covers_the_host(self):
        g = self.fake.add_domain('g', 1)
        self.adapter.apply([change(g, 'vcpu', '3', 0)])
        self.assertEqual([(False, False, False, True)], g.vcpuPinInfo(0))


class TestMemoryFromProc(testtools.TestCase):

    def test_numa_maps_anonymous_memory_only(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        os.makedirs(os.path.join(tmp, '42'))
        with open(os.path.join(tmp, '42', 'numa_maps'), 'w') as f:
            f.write(
                '7f00 default anon=100 dirty=100 N0=60 N1=40 '
                'kernelpagesize_kB=4\n'
                '7f10 default file=/usr/lib/libc.so.6 mapped=50 N1=50 '
                'kernelpagesize_kB=4\n'
                '7f20 bind:0 file=/dev/hugepages/x huge dirty=2 N0=2 '
                'kernelpagesize_kB=2048\n'
                '7f30 default\n')
        self.assertEqual({'0': 60 * 4 + 2 * 2048, '1': 40 * 4},
                         virtread.read_memory_by_node(42, proc=tmp))

    def test_missing_process(self):
        self.assertEqual({}, virtread.read_memory_by_node(1, proc='/nonexist'))

    def test_pid_file(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(tmp, 'g.pid'), 'w') as f:
            f.write('1234\n')
        self.assertEqual(1234, libvirtapi.qemu_pid('g', tmp))
        self.assertIsNone(libvirtapi.qemu_pid('other', tmp))


class TestUnprovenPid(testtools.TestCase):
    """A pid file naming a process that is not the guest's qemu here
    (another PID namespace): nothing is read from that process."""

    def test_other_process_gives_unknown_facts(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.FakeLogger())
        # This test's own process stands for the wrong one: it has memory
        # and threads of its own, and its command line names no guest.
        with open(os.path.join(tmp, 'g.pid'), 'w') as f:
            f.write('%d\n' % os.getpid())
        host = virt.Host('qemu:///system', host_options(), run_dir=tmp)
        self.assertEqual({}, host.reader._memory_from_proc('g'))
        self.assertEqual({}, host.reader._affinity('g'))
        self.assertEqual({}, host.reader._schedstat('g'))
        self.assertIn('is not its qemu', host.proof.unknown()['g'])
