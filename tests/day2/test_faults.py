"""Day two: the control plane failing during a burst of boots, with the
package on and off (RabbitMQ stopped 60 s, MariaDB stopped 60 s,
nova-compute killed in the middle of a boot). nova's outcome must be the
same on and off, and the running guests pinned throughout: 0 unpinned
guest-seconds beyond one pass per event.

nova 34 itself can hang under a RabbitMQ outage, package on or off
(ENVIRONMENT.md; doc/source/reference/nova-integration.rst, "Day two"): where a
server stays
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

    def package_errors(self):
        """ERROR lines of the package's own in the nova-computes' logs
        since the case began (nova's own, such as its DBConnectionError
        or AMQP reconnects during the fault, are the fault's, on and
        off alike)."""
        # The package's loggers and modules are nova_pinning_hooks.*, its
        # messages start "nova-pinning-hooks:" (the cloud's virtualenv
        # path, .../nova-pinning-hooks/cloud/..., is in every traceback).
        return [line for line in cloud_base.compute_log_errors(self.sizes)
                if 'nova_pinning_hooks' in line or
                'nova-pinning-hooks:' in line]

    def faults(self, servers):
        """{name: the fault nova recorded for a server in ERROR}."""
        out = {}
        for s in servers:
            s = self.admin.compute.get_server(s.id)
            if s.status == 'ERROR':
                out[s.name[len(cloud_base.PREFIX):]] = (
                    s.fault or {}).get('message', '')[:200]
        return out

    def run_case(self, what, fault):
        """The fault during a burst, package on then off; each arm's
        figures recorded before anything is asserted."""
        outcomes, results = {}, {}
        for package in ('on', 'off'):
            self.package(package)
            self.delete_all()
            self.fleet()
            burst = []

            def event(p=package, burst=burst):
                burst.extend(fault(self))
                outcomes[p] = self.finish(burst)
            figures = self.sample(event)
            results[package] = self.record(
                what, during_burst=outcomes[package][0],
                restarted=outcomes[package][1], faults=self.faults(burst),
                package_errors=self.package_errors(), **figures)
        on = results['on']
        self.assertEqual(0.0, on['beyond_one_pass'], on)
        self.assertEqual([], on['package_errors'], on)
        return outcomes, results

    def same_outcome(self, outcomes, results):
        """The burst's servers end the same way on and off, the same ones
        in ERROR (nova's fault messages are compared too, but came back
        empty through openstacksdk here)."""
        self.assertEqual(outcomes['off'][0], outcomes['on'][0], results)
        self.assertEqual(results['off']['faults'], results['on']['faults'],
                         results)

    def none_left_in_build(self, outcomes, results):
        for package, (states, _) in outcomes.items():
            self.assertNotIn('BUILD', states.values(), (package, results))

    @staticmethod
    def outage(service):
        """The fault: ``service`` stopped OUTAGE seconds, 2 s into the
        burst (``cloud.sh control stop|start``)."""
        def fault(case):
            servers = case.burst()
            time.sleep(2)
            cloud_base.cloud('control', 'stop', service)
            time.sleep(OUTAGE)
            cloud_base.cloud('control', 'start', service)
            return servers
        return fault

    def test_rabbitmq_stopped(self):
        outcomes, results = self.run_case('RabbitMQ stopped 60 s',
                                          self.outage('rabbitmq'))
        # nova's own hang may strike on or off (recorded, not compared):
        # a boot stuck in BUILD until its nova-compute restarts, which
        # then puts it in ERROR (seen on and off alike, 2026-11-27); no
        # server stays in BUILD.
        self.none_left_in_build(outcomes, results)

    def test_mariadb_stopped(self):
        outcomes, results = self.run_case('MariaDB stopped 60 s',
                                          self.outage('mariadb'))
        # Which boots of the burst fail depends on where each was when
        # the database went (seen on: 2, 3, 2 of 3 in ERROR; off: 2, 3):
        # recorded on and off, not compared; none stays in BUILD.
        self.none_left_in_build(outcomes, results)

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
        outcomes, results = self.run_case('nova-compute killed mid-boot',
                                          fault)
        self.same_outcome(outcomes, results)
