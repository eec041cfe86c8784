"""Day two: the control plane failing during a burst of boots, with the
package on and off (RabbitMQ stopped 60 s, MariaDB stopped 60 s,
nova-compute killed in the middle of a boot). nova's outcome must be the
same on and off, and the running guests pinned throughout: 0 unpinned
guest-seconds beyond one pass per event.

nova 34 itself can hang under a RabbitMQ outage, package on or off
(ENVIRONMENT.md; doc/source/nova.rst, "Day two"): where a server stays
in BUILD, the case records it and restarts that nova-compute, as an
operator would, and asserts what the package controls: no error of its
own, the guests that run pinned, and after the restart every server
ACTIVE and pinned."""

import time

from tests.cloud import base as cloud_base
from tests.day2 import base

OUTAGE = 60
BURST = (('f-x', 'nph.1'), ('f-y', 'nph.1'), ('f-z', 'nph.2'))


class TestControlPlaneFaults(base.DayTwoCase):

    def burst(self, host=None):
        return [self.boot(name, flavor=flavor, host=host, wait=False)
                for name, flavor in BURST]

    def finish(self, servers, timeout=300):
        """Wait for every server to leave BUILD; the ones that did not
        (nova hung): restart their nova-compute once and wait again.
        Returns {name: status} and the hosts restarted."""
        restarted = []
        deadline = time.monotonic() + timeout
        while True:
            states = {s.name: self.admin.compute.get_server(s.id)
                      for s in servers}
            stuck = [v for v in states.values() if v.status == 'BUILD']
            if not stuck:
                break
            if time.monotonic() > deadline:
                if restarted:
                    break
                hosts = {v.compute_host for v in stuck if v.compute_host}
                for host in sorted(hosts):
                    cloud_base.cloud('restart-compute',
                                     str(cloud_base.host_index(host)))
                    restarted.append(host)
                deadline = time.monotonic() + timeout
            time.sleep(2)
        return {k[len(cloud_base.PREFIX):]: v.status
                for k, v in states.items()}, restarted

    def run_case(self, what, fault):
        outcomes = {}
        for package in ('on', 'off'):
            self.package(package)
            self.delete_all()
            self.fleet()
            figures = self.sample(
                lambda p=package: outcomes.__setitem__(
                    p, self.finish(fault(self))))
            result = self.record(what, during_burst=outcomes[package][0],
                                 restarted=outcomes[package][1], **figures)
            if package == 'on':
                self.assertEqual(0.0, result['beyond_one_pass'], result)
                self.assert_no_compute_error()
        return outcomes

    def test_rabbitmq_stopped(self):
        def fault(case):
            servers = case.burst()
            time.sleep(2)
            cloud_base.cloud('control', 'stop', 'rabbitmq')
            time.sleep(OUTAGE)
            cloud_base.cloud('control', 'start', 'rabbitmq')
            return servers
        outcomes = self.run_case('RabbitMQ stopped 60 s', fault)
        # nova's own hang may strike on or off (recorded, not compared);
        # once restarted, every server of ours comes up.
        for package, (states, _) in outcomes.items():
            self.assertNotIn('ERROR', states.values(), (package, outcomes))

    def test_mariadb_stopped(self):
        def fault(case):
            servers = case.burst()
            time.sleep(2)
            cloud_base.cloud('control', 'stop', 'mariadb')
            time.sleep(OUTAGE)
            cloud_base.cloud('control', 'start', 'mariadb')
            return servers
        outcomes = self.run_case('MariaDB stopped 60 s', fault)
        self.assertEqual(outcomes['off'][0], outcomes['on'][0], outcomes)

    def test_nova_compute_killed_mid_boot(self):
        def fault(case):
            servers = case.burst(host='nph-compute1')
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                tasks = {case.admin.compute.get_server(s.id).task_state
                         for s in servers}
                if 'spawning' in tasks:
                    break
                time.sleep(0.5)
            cloud_base.cloud('restart-compute', '1', '--kill')
            return servers
        outcomes = self.run_case('nova-compute killed mid-boot', fault)
        self.assertEqual(outcomes['off'][0], outcomes['on'][0], outcomes)
