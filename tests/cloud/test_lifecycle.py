"""The package's life inside a real nova-compute: a live migration's
arriving XML, the ratio an operator sets in placement, nova-compute
restarted and killed, and the package switched off."""

import json
import os
import re
import subprocess
import time

from tests.cloud import base
from tests.cloud import kernel


def domain_xml(host, name, inactive=False):
    cmd = ['virsh', '-c', kernel.LIBVIRT_URIS[host], 'dumpxml', name]
    if inactive:
        cmd.append('--inactive')
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                          check=True).stdout


def status_json(host):
    """``nova-pinning status --format json`` as the operator runs it on
    that compute host (in its namespaces, with nova-compute's config)."""
    n = base.host_index(host)
    if n == 2 and base._state('compute2-layout') == 'kolla':
        out = subprocess.run(
            base.kolla_nova_pinning_argv() + [
                'status', '--format', 'json'],
            capture_output=True, text=True, timeout=60, check=True).stdout
        return json.loads(out)
    with open('/run/nph-cloud/libvirtd%d.pid' % n) as f:
        pid = f.read().split()[0]  # pid and start time
    with open(os.path.join(base.STATE, 'series')) as f:
        series = f.read().strip()
    venv = '/var/cache/nova-pinning-hooks/cloud/venv-%s' % series
    etc = os.path.join(base.STATE, 'etc', 'nova')
    out = subprocess.run(
        ['nsenter', '-t', pid, '-m', '-u', '-C', '--',
         venv + '/bin/nova-pinning',
         '--config-file', etc + '/nova.conf',
         '--config-file', '%s/compute%d.conf' % (etc, n),
         '--config-file', '%s/pinning%d.conf' % (etc, n),
         'status', '--format', 'json'],
        capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out)


def overcommit_file(host):
    path = os.path.join(base.STATE, 'compute%d' % base.host_index(host),
                        'pinning', 'nova', 'overcommit.json')
    with open(path) as f:
        return json.load(f)


class TestLifecycle(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if base.package_state() != 'on':
            base.cloud('package', 'on')

    def test_live_migrated_guest_arrives_without_the_source_pins(self):
        a = self.boot('lm', host='nph-compute1')
        self.assert_pinned()
        name = self.get(a).instance_name
        self.assertIn('<vcpupin', domain_xml('nph-compute1', name))
        self.admin.compute.live_migrate_server(a, host='nph-compute2',
                                               block_migration='auto')
        self.wait_host(a, 'nph-compute2')
        self.assert_no_fault(a)
        # nova defined the guest on the destination from the XML it
        # migrated: none of the source's pins in it ...
        inactive = domain_xml('nph-compute2', name, inactive=True)
        self.assertNotIn('<vcpupin', inactive)
        self.assertNotIn('<emulatorpin', inactive)
        # ... and the destination's package pinned it, live: the kernel
        # agrees, and its emulator pin is there (nova writes none for a
        # plain flavor; libvirt shows no <vcpupin> equal to nova's
        # <vcpu cpuset='0'>, which is this one-CPU pool).
        self.assert_pinned()
        self.assertIn("<emulatorpin cpuset='0'/>",
                      domain_xml('nph-compute2', name))
        # And back out of nph-compute2 (kolla's containers in the default
        # run: its libvirtd resolves nph-compute1 from the cloud's
        # inventory of names, issue 42), pinned again by nph-compute1's
        # package.
        self.admin.compute.live_migrate_server(a, host='nph-compute1',
                                               block_migration='auto')
        self.wait_host(a, 'nph-compute1')
        self.assert_no_fault(a)
        inactive = domain_xml('nph-compute1', name, inactive=True)
        self.assertNotIn('<vcpupin', inactive)
        self.assert_pinned()
        self.assert_no_compute_error()

    def test_a_ratio_set_in_placement_reaches_the_file_and_the_pass(self):
        rp = next(self.admin.placement.resource_providers(
            name='nph-compute1'))
        path = '/resource_providers/%s/inventories/VCPU' % rp.id

        def set_ratio(ratio):
            inv = self.admin.placement.get(path).json()
            inv['allocation_ratio'] = ratio
            r = self.admin.placement.put(path, json=inv)
            self.assertEqual(200, r.status_code, r.text)

        guests = [self.boot('r%d' % i, host='nph-compute1')
                  for i in range(3)]
        self.assert_pinned()
        before = status_json('nph-compute1')
        self.assertEqual(4.0, before['allocation_ratio'])
        self.assertEqual({'rule-2-node-range'},
                         {g['rule'] for g in before['guests']})
        self.addCleanup(set_ratio, 4.0)
        set_ratio(1.0)
        # nova refreshes its provider tree from placement (every 10 s
        # here, at its periodic audit), the package notes the ratio and
        # rewrites its file.
        deadline = time.monotonic() + base.AUDIT_WAIT
        while overcommit_file('nph-compute1')['allocation_ratio'] != 1.0:
            self.assertLess(time.monotonic(), deadline,
                            'the ratio never reached the overcommit file')
            time.sleep(1)
        self.assertEqual('placement',
                         overcommit_file('nph-compute1')['ratio_source'])
        # The next pass (an operation) plans with it: 3 vCPUs > 2 x 1.
        self.admin.compute.reboot_server(guests[0], 'HARD')
        self.wait_status(guests[0], 'ACTIVE')
        deadline = time.monotonic() + base.PASS_WAIT
        while True:
            after = status_json('nph-compute1')
            rules = {g['rule'] for g in after['guests']}
            if rules == {'rule-1-host-range'}:
                break
            self.assertLess(time.monotonic(), deadline, rules)
            time.sleep(1)
        self.assertEqual(1.0, after['allocation_ratio'])
        self.assertEqual('placement', after['allocation_ratio_source'])
        self.assert_pinned()

    def test_nova_compute_restarted_and_killed(self):
        a = self.boot('k1', host='nph-compute1')
        b = self.boot('k2', host='nph-compute1')
        self.assert_pinned()
        log = os.path.join(base.LOG, 'nova-compute1.log')
        for how in ([], ['--kill']):
            size = os.path.getsize(log)
            base.cloud('restart-compute', '1', *how)
            # The package came back with nova-compute: its start pass, a
            # line of the new process's (the old one's last lines come
            # after ``size`` too).
            with open('/run/nph-cloud/nova-compute1.pid') as f:
                pid = ' %s ' % f.read().split()[0]
            deadline = time.monotonic() + base.PASS_WAIT
            while True:
                with open(log, 'rb') as f:
                    f.seek(size)
                    new = f.read().decode('utf-8', 'replace')
                if [line for line in new.splitlines() if pid in line and
                        re.search(r'nova_pinning_hooks.* rebinding pass',
                                  line)]:
                    break
                self.assertLess(time.monotonic(), deadline,
                                'no pass after nova-compute %s' % (
                                    'was killed' if how else 'restarted'))
                time.sleep(1)
            self.assert_pinned()
            for s in (a, b):
                self.assert_no_fault(s)
        # And it still follows operations: a third guest, node range.
        self.boot('k3', host='nph-compute1')
        self.assert_pinned()
        self.assert_no_compute_error()

    def test_switched_off_no_pin_of_ours(self):
        base.cloud('package', 'off')
        self.addCleanup(base.cloud, 'package', 'on')
        a = self.boot('off1', host='nph-compute1')
        b = self.boot('off2', host='nph-compute2')
        self.assert_pinned(package_on=False)
        for s, host in ((a, 'nph-compute1'), (b, 'nph-compute2')):
            xml = domain_xml(host, self.get(s).instance_name)
            self.assertNotIn('<vcpupin', xml)
            self.assertNotIn('<emulatorpin', xml)
        with open(os.path.join(base.LOG, 'nova-compute1.log'), 'rb') as f:
            f.seek(self.sizes[os.path.join(base.LOG, 'nova-compute1.log')])
            tail = f.read().decode('utf-8', 'replace')
        # The restart without the driver line: no pass of ours since.
        restart = tail.rfind('Starting compute node')
        self.assertNotEqual(-1, restart)
        self.assertNotIn('rebinding pass', tail[restart:])
        self.assert_no_compute_error()

    def test_switched_off_live_migration_both_ways(self):
        """With the package off (``cloud.sh package off``: no driver
        line), nova's own live migration both ways between the layouts
        (nph-compute2 in kolla's containers in the default run): the
        baseline the package's runs are compared with. The guest runs
        where nova puts it on each host."""
        base.cloud('package', 'off')
        self.addCleanup(base.cloud, 'package', 'on')
        a = self.boot('lm-off', host='nph-compute1')
        self.assert_pinned(package_on=False)
        for host in ('nph-compute2', 'nph-compute1'):
            self.admin.compute.live_migrate_server(a, host=host,
                                                   block_migration='auto')
            self.wait_host(a, host)
            self.assert_no_fault(a)
            self.assert_pinned(package_on=False)
        self.assert_no_compute_error()

    def test_switched_off_our_pins_never_reach_another_host(self):
        """doc/source/admin/nova.rst's switch-off ([nova_pinning] enabled =
        false, the driver line kept): a guest the package had pinned to
        CPU 1 of nph-compute1, live-migrated afterwards, arrives on
        nph-compute2 without that pin (CPU 1 is nph-compute2's
        cpu_dedicated_set), live or persistent, and runs where nova puts
        it. Before, "off" installed no filter: the live and persistent
        XML there held <vcpupin vcpu='0' cpuset='1'/>, the vCPU ran on
        the dedicated CPU."""
        guests = [self.boot('home%d' % i, host='nph-compute1')
                  for i in (1, 2)]
        self.assert_pinned()  # one-to-one: one on CPU 0, one on CPU 1
        view = self.kernel_view()
        on_1 = [g for g in guests if view[g.id][2] == {0: frozenset({1})}]
        self.assertEqual(1, len(on_1), view)
        moved = on_1[0]
        for g in guests:
            if g is not moved:  # its live pins stay on nph-compute1 (off)
                self.admin.compute.delete_server(g)
                self.admin.compute.wait_for_delete(g, wait=120)
        name = self.get(moved).instance_name
        self.assertIn("<vcpupin vcpu='0' cpuset='1'/>",
                      domain_xml('nph-compute1', name))
        base.cloud('package', 'disabled')
        self.addCleanup(base.cloud, 'package', 'on')
        self.admin.compute.live_migrate_server(moved, host='nph-compute2',
                                               block_migration='auto')
        self.wait_host(moved, 'nph-compute2')
        self.assert_no_fault(moved)
        for inactive in (True, False):
            xml = domain_xml('nph-compute2', name, inactive=inactive)
            self.assertNotIn("cpuset='1'", xml)
            self.assertNotIn('<emulatorpin', xml)
        # Nothing of ours pins it there: where nova puts it (its shared
        # set, CPU 0), never on the dedicated CPU 1.
        self.assert_pinned(package_on=False)
        self.assert_no_compute_error()
