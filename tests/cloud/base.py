"""Tests against the one-machine cloud of ``tools/cloud.sh``: real
keystone, placement, glance, neutron and nova services and two real
nova-computes with the libvirt driver, driven only through the public API
(openstacksdk, the ``nph`` and ``nph-admin`` clouds of
/etc/openstack/clouds.yaml), with the kernel checked after every step.

What the kernel is asked: each guest's vCPU threads ("CPU N/KVM" in
/proc/<qemu pid>/task/<tid>/comm) and their ``Cpus_allowed_list``. The
qemu pid is in the compute's libvirt run directory (its namespace's
/run, kept under the cloud's state directory). What the policy says is
computed here from the API's own view, independently of the package:

* nph-compute1: pool {0, 1} (no cpu sets); nph-compute2: pool {0}
  (``cpu_shared_set = 0``; CPU 1 is nova's ``cpu_dedicated_set``).
* one node per host; with V the live shared guests' vCPUs and r the
  allocation ratio: V <= |P| one-to-one (each vCPU thread alone on one
  pool CPU), otherwise range (every vCPU thread on the whole pool).
* dedicated guests keep nova's pins (CPU 1 of nph-compute2).
* with the package off: nothing of ours, every vCPU thread on what nova
  gives (the pool of the host: nova's ``<vcpu cpuset>``; a guest nova 29
  live-migrates keeps the source's CPUs, ``nova_moves_the_shared_set``).

Prerequisite: ``tools/cloud.sh up`` (tools/run-tests.sh runs it). Without
a cloud these tests fail when ``NPH_FUNCTIONAL_REQUIRED=1`` (CI).
"""

import json
import os
import subprocess
import time

import testtools

from tests import machine
from tests import nova_releases
from tests.cloud.kernel import cpus  # noqa: F401  (for the tests)
from tests.cloud.kernel import host_index  # noqa: F401  (for the tests)
from tests.cloud.kernel import HOSTS
from tests.cloud.kernel import qemu_pid
from tests.cloud.kernel import STATE
from tests.cloud.kernel import vcpu_threads

LOG = '/var/log/nph-cloud'
TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
CLOUD = os.path.join(TOP, 'tools', 'cloud.sh')
POOL = {'nph-compute1': frozenset({0, 1}), 'nph-compute2': frozenset({0})}
NOVA_DEDICATED = {'nph-compute2': frozenset({1})}
PREFIX = 'nph-cloud-'
TIMEOUT = 240
# s: until the passes after nova's operation show in /proc, on a loaded
# host (a pass runs after the operation returns, behind the others).
PASS_WAIT = 120
# s: until nova-compute's periodic audit (update_available_resource,
# every 60 s, later on a loaded host) has run after an event, twice if
# the first ran just before it.
AUDIT_WAIT = 300
# s: one tools/cloud.sh command at most; its own bounds (a loaded
# host's: a nova-compute's start, 360 s) say why first.
CLOUD_WAIT = 1200
KOLLA_PREFIX = 'nph_cloud_'  # tools/cloud.sh's, for --compute2 kolla
KOLLA_CONFIG = '/var/lib/kolla/config_files/'
KOLLA_CONFIG_FILES = ('nova.conf', 'cpu-mode.conf', 'compute2.conf',
                      'pinning2.conf', 'kolla.conf')


# ERRORs of nova's and placement's own, whatever the package does,
# each a logged event (one timestamp, one process) left out when all its
# lines say so:
# * as SIGTERM stops nova-compute 34 (a restart) its periodic task loop
#   fails: "A dynamic interval looping call should supply either an
#   interval or periodic_interval_max" (seen package on and off);
# * nova's resource update and a service enable/disable's trait update
#   race in placement: "Failed to update traits ... Error updating
#   resources for node ... Another thread concurrently updated the
#   resource provider data" (placement answers 500; nova retries at its
#   next periodic update; seen in 2 of 4 runs of the operation sequence);
#   the same race on the inventory: "Failed to update inventory ... Got
#   409 ... resource provider generation conflict" (an allocation written
#   for a guest bumps the provider's generation while nova-compute writes
#   its inventory with the one it had; nova's resource tracker retries at
#   once, and its report client logs the 409 as an ERROR first; seen
#   three times in an hour, package on and off, at a claim and in the
#   periodic update; the package never writes to placement);
# * a restart's SIGTERM (cloud.sh signals nova-compute's process group)
#   kills the ``qemu-img info`` of nova's periodic resource update, which
#   then logs "Error updating resources for node ...: InvalidDiskInfo ...
#   qemu-img ... Exit code: -15" as its process shuts down gracefully
#   (seen once, 2026-11-25, in test_nova_compute_restarted_and_killed on
#   a loaded machine; qemu-img is nova's, not the package's);
# * while nova-scheduler restarts (cloud.sh weigher on|off, package
#   on|off), no queue is bound to its fanout exchange, which RabbitMQ
#   then deletes (auto-delete): nova-compute's periodic
#   _sync_scheduler_instance_info fails to publish to it ("no exchange
#   'scheduler_fanout'") and runs again at its next period (seen
#   2026-11-27 in test_weigher, 13 s after the scheduler's restart).
NOVA_OWN = (('Graceful shutdown', 'oslo.service.backend._threading.'
             'loopingcall', 'A dynamic interval looping call'),
            ('Graceful shutdown', 'Error updating resources for node',
             'InvalidDiskInfo', 'qemu-img', 'Exit code: -15'),
            ('concurrently updated the resource provider data',),
            ('nova.scheduler.client.report', 'Failed to update inventory',
             'Got 409', 'resource provider generation conflict'),
            ('_sync_scheduler_instance_info',
             "no exchange 'scheduler_fanout'"))


def compute_log_errors(since_sizes):
    """ERROR lines the nova-computes logged since ``since_sizes``, but
    those of NOVA_OWN."""
    errors = []
    for n in (1, 2):
        path = os.path.join(LOG, 'nova-compute%d.log' % n)
        with open(path, 'rb') as f:
            f.seek(since_sizes.get(path, 0))
            lines = f.read().decode('utf-8', 'replace').splitlines()
        events = {}  # (date, time, pid) -> its ERROR lines, in order
        shutdown = set()  # pids that logged their graceful shutdown
        for line in lines:
            fields = line.split()
            if len(fields) < 4:
                continue
            if 'Graceful shutdown' in line:
                shutdown.add(fields[2])
            if fields[3] in ('ERROR', 'CRITICAL'):
                # One event: one process, one second (nova logs the
                # placement client's error and its own a millisecond
                # apart).
                key = (fields[0], fields[1].split('.')[0], fields[2])
                events.setdefault(key, []).append(line)
        for key, group in events.items():
            text = '\n'.join(group)
            own = any(all(part in text or (
                part == 'Graceful shutdown' and key[2] in shutdown)
                for part in parts) for parts in NOVA_OWN)
            if not own:
                errors.extend(line[:400] for line in group)
    return errors


# nph-compute2 in kolla's containers: its libvirtd asks for SASL
# credentials (tools/kolla-compute.sh made them; tools/cloud.sh's
# clients read the same file); virsh and libvirt here read them too.
_AUTH = os.path.join(STATE, 'compute2', 'config', 'auth.conf')
if os.path.exists(_AUTH):
    os.environ.setdefault('LIBVIRT_AUTH_FILE', _AUTH)


def log_sizes():
    out = {}
    for n in (1, 2):
        path = os.path.join(LOG, 'nova-compute%d.log' % n)
        try:
            out[path] = os.path.getsize(path)
        except OSError:
            out[path] = 0
    return out


def kolla_nova_pinning_argv():
    """``nova-pinning`` in nph-compute2's nova_compute container (kolla's
    layout) with nova-compute's own configuration, as an operator runs it
    there (``podman exec``)."""
    argv = ['podman', 'exec', KOLLA_PREFIX + 'nova_compute',
            '/var/lib/kolla/venv/bin/nova-pinning']
    for f in KOLLA_CONFIG_FILES:
        argv += ['--config-file', KOLLA_CONFIG + f]
    return argv


class CloudCommandFailed(Exception):
    """``tools/cloud.sh`` exited non-zero; its last words in the text."""


def cloud(*args, timeout=CLOUD_WAIT):
    proc = subprocess.run([CLOUD] + list(args), capture_output=True,
                          text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise CloudCommandFailed('cloud.sh %s: exit %d: %s' % (
            ' '.join(args), proc.returncode,
            (proc.stderr.strip() or proc.stdout.strip())[-800:]))
    return proc.stdout


def _state(name):
    try:
        with open(os.path.join(STATE, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def package_state():
    return _state('package')


def nova_moves_the_shared_set():
    """Whether this cloud's nova rewrites a live-migrated guest's ``<vcpu
    cpuset>`` for the destination's ``cpu_shared_set``. nova 34 does (its
    migrate data carries ``dst_cpu_shared_set_info``); nova 29 (2024.1)
    does not: the guest keeps the source's CPUs, package off
    (tools/nova-releases: moves-shared-set)."""
    series = _state('series')  # none recorded: cloud.sh's default, the newest
    release = nova_releases.release(int(series)) if series \
        else nova_releases.newest()
    return release.has('moves-shared-set')


class CloudTestCase(testtools.TestCase):

    admin = None
    member = None

    @classmethod
    def connect(cls):
        import openstack
        if CloudTestCase.admin is None:
            CloudTestCase.admin = openstack.connect(cloud='nph-admin')
            CloudTestCase.member = openstack.connect(cloud='nph')
        with open(os.path.join(STATE, 'cloud.json')) as f:
            CloudTestCase.ids = json.load(f)

    def setUp(self):
        super().setUp()
        missing = self._missing()
        if missing:
            if os.environ.get('NPH_FUNCTIONAL_REQUIRED') == '1':
                self.fail('the cloud is not there: %s' % missing)
            self.skipTest(missing)
        self.connect()
        # What an interrupted run may have left: its guests, a disabled
        # compute.
        self.delete_all()
        for svc in self.admin.compute.services():
            if svc.binary == 'nova-compute' and svc.status == 'disabled' \
                    and svc.disabled_reason == 'test':
                self.admin.compute.enable_service(svc)
        self.sizes = log_sizes()
        # {server id: CPUs}: a guest nova left on other CPUs than its
        # host's pool (package off), for a reason of nova's own.
        self.kept_pool = {}
        self.addCleanup(self.delete_all)

    @staticmethod
    def _missing():
        if os.geteuid() != 0:
            return 'not root'
        if not os.path.exists(os.path.join(STATE, 'cloud.json')):
            return 'no cloud: run tools/cloud.sh up'
        if not os.path.exists('/etc/openstack/clouds.yaml'):
            return 'no /etc/openstack/clouds.yaml'
        return machine.cpus_unlike_tests()

    # --- the API ---------------------------------------------------------
    def flavor(self, name):
        return self.ids['flavors'][name]

    def boot(self, name, flavor='nph.1', host=None, wait=True):
        kwargs = {}
        conn = self.member
        if host:
            # An admin puts a guest on a host.
            conn = self.admin
            kwargs['availability_zone'] = 'nova:' + host
        server = conn.compute.create_server(
            name=PREFIX + name, image_id=self.ids['image'],
            flavor_id=self.flavor(flavor), networks='none', **kwargs)
        if wait:
            server = self.wait_status(server, 'ACTIVE')
        return server

    def wait_host(self, server, host):
        """After a live migration (whose task state the API set before
        answering): ACTIVE again, with no task, on ``host``."""
        s = self.wait_status(server, 'ACTIVE')
        if s.compute_host != host:
            migrations = [(m.status, m.dest_compute) for m in
                          self.admin.compute.migrations(instance_uuid=s.id)]
            self.fail('%s stayed on %s: migrations %s' % (
                s.name, s.compute_host, migrations))
        return s

    def get(self, server):
        return self.admin.compute.get_server(server.id)

    def failed_action(self, server):
        """The newest instance action, if nova recorded it as failed (a
        failed resize or migration leaves the guest ACTIVE: only its
        action says so)."""
        for action in self.admin.compute.server_actions(server.id):
            if action.message == 'Error':
                return '%s: %s' % (action.action, action.events)
            return None
        return None

    def wait_status(self, server, status, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        checked = time.monotonic()
        while True:
            s = self.admin.compute.get_server(server.id)
            if s.status == status and not s.task_state:
                return s
            if s.status == 'ERROR':
                self.fail('%s went to ERROR: %s' % (s.name, s.fault))
            if not s.task_state and time.monotonic() - checked > 5:
                checked = time.monotonic()
                failed = self.failed_action(s)
                if failed:
                    self.fail('%s: %s' % (s.name, failed))
            if time.monotonic() > deadline:
                self.fail('%s is %s/%s, not %s, after %d s' % (
                    s.name, s.status, s.task_state, status, timeout))
            time.sleep(0.5)

    def servers(self):
        return [s for s in self.admin.compute.servers(all_projects=True)
                if s.name.startswith(PREFIX)]

    def delete_all(self):
        for s in self.servers():
            try:
                self.admin.compute.delete_server(s.id, force=True)
            except Exception:
                self.admin.compute.delete_server(s.id)
        deadline = time.monotonic() + TIMEOUT
        while self.servers() and time.monotonic() < deadline:
            time.sleep(1)

    # --- the kernel ------------------------------------------------------
    def kernel_view(self):
        """{server id: (host, flavor name, {vCPU: allowed CPUs})} for every
        live guest of ours: whose qemu runs (ACTIVE, and also PAUSED,
        RESCUE, VERIFY_RESIZE: the policy counts what runs, not what the
        API calls active)."""
        view = {}
        for s in self.servers():
            if s.compute_host not in HOSTS:
                continue
            pid = qemu_pid(s.compute_host, s.instance_name)
            threads = vcpu_threads(pid) if pid else {}
            if not threads:
                continue
            view[s.id] = (s.compute_host, s.flavor['original_name'],
                          threads)
        return view

    def expected(self, view, package_on=True):
        """What the policy says for each guest: a set of acceptable
        allowed-CPU sets per vCPU, or 'one-to-one'."""
        out = {}
        for host in HOSTS:
            guests = {sid: v for sid, v in view.items() if v[0] == host}
            shared = {sid: v for sid, v in guests.items()
                      if v[1] != 'nph.dedicated'}
            total = sum(len(v[2]) for v in shared.values())
            for sid, v in guests.items():
                if v[1] == 'nph.dedicated':
                    out[sid] = ('nova', NOVA_DEDICATED[host])
                elif not package_on:
                    out[sid] = ('range', self.kept_pool.get(sid, POOL[host]))
                elif total <= len(POOL[host]):
                    out[sid] = ('one-to-one', POOL[host])
                else:
                    out[sid] = ('range', POOL[host])
        return out

    def pinned_as_policy(self, package_on=True):
        """None when every live guest's vCPU threads are where the policy
        says; otherwise what differs."""
        view = self.kernel_view()
        wrong = []
        taken = {}
        for sid, (mode, pool) in self.expected(view, package_on).items():
            host, flavor, threads = view[sid]
            for vcpu, allowed in sorted(threads.items()):
                if mode == 'one-to-one':
                    if len(allowed) != 1 or not allowed <= pool:
                        wrong.append('%s vCPU %d on %s, not one pool CPU' % (
                            sid, vcpu, sorted(allowed)))
                    elif (host, allowed) in taken:
                        wrong.append('%s vCPU %d shares CPU %s' % (
                            sid, vcpu, sorted(allowed)))
                    taken[(host, allowed)] = sid
                elif allowed != pool:
                    wrong.append('%s (%s) vCPU %d on %s, not %s' % (
                        sid, mode, vcpu, sorted(allowed), sorted(pool)))
        return '; '.join(wrong) or None

    def assert_pinned(self, package_on=True, timeout=PASS_WAIT):
        """Every live guest on both hosts where the policy says, within
        ``timeout`` (passes run after nova's operation returns)."""
        deadline = time.monotonic() + timeout
        while True:
            wrong = self.pinned_as_policy(package_on)
            if wrong is None:
                return
            if time.monotonic() > deadline:
                self.fail('not pinned as the policy says after %d s: %s' % (
                    timeout, wrong))
            time.sleep(0.2)

    def assert_no_fault(self, server):
        s = self.get(server)
        self.assertIsNone(s.fault, '%s has a fault: %s' % (s.name, s.fault))
        self.assertNotEqual('ERROR', s.status)

    def assert_no_compute_error(self):
        self.assertEqual([], compute_log_errors(self.sizes))
