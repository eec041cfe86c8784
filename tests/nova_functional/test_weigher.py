"""The one-to-one weigher inside nova's own functional test framework.

nova's ``nova.tests.functional.libvirt.base.ServersTestBase``: the real
REST API, conductor, scheduler (placement from openstack-placement,
nova's filters and weighers) and ComputeManagers with the libvirt driver
in one process, on nova's fake libvirt. Four computes of 2 NUMA nodes x
4 cores x 2 threads (16 pCPUs, 32 GiB a node), ``cpu_allocation_ratio``
4.0. The same seeded sequence of boots (``SEQUENCE``: flavors of 1, 2,
4 and 8 vCPUs, 1 GiB a vCPU, no NUMA extra specs, until the guests' vCPUs
reach the computes' pCPUs) goes once through nova's scheduler with
``OneToOneWeigher`` (``[filter_scheduler] weight_classes =
nova.scheduler.weights.all_weighers,nova_pinning_hooks.nova.weigher.
OneToOneWeigher``, loaded by nova at the scheduler's start) and once
with nova's default weighers, each time on four fresh computes (those of
the first run disabled). The package's engine then plans each compute's
guests; with the weigher more guests, and more of their vCPUs, must be
one-to-one.

The package is switched on as in ``test_operations`` (the call its
notification driver makes, ``activation.activate(CONF)``): the hooks on
nova's ComputeManager, and on nova's ``ResourceTracker._update`` the
summary's hook (``nova.nodesummary``). Two things stand in for what one
nova-compute process would have:

* **the passes** (``EnginePasses`` replaces the reconciler): a pass plans
  every compute from its own fake libvirt connection, as that compute's
  own pass would: the topology from its ``getCapabilities()`` (parsed by
  the package's ``topology``), its running domains' vCPUs and memory,
  the pins and memory placement of its last plan carried into the next
  (a new guest's memory lands on its home node, or over the nodes when
  it floats: ``tests/passmodel.py``, ``benchmarks/fleet.py``'s model),
  ``policy.make_plan`` with the options a pass takes from the
  configuration, and the ``summary.Basis`` the pass thread keeps
  (``summary.basis``). Passes are
  requested by the package's hooks (the build's, as on a real compute)
  and by the test, which waits after each boot for the pass that saw
  the new guest (what a pass a few milliseconds after the build gives).
  A real pass against nova's fake libvirt is not run: the fake renders
  domain XML without nova's metadata, and has no /proc or cgroups;
* **one summary per compute node**: nova runs the four computes in one
  process, and the package's activation, so its ``Reporter``, is one a
  process (one nova-compute, one node, in production). ``PerNodeReporter``
  takes the ``Reporter``'s place (``activation._REPORTER``): one real
  ``nodesummary.Reporter`` per ``compute_node.hypervisor_hostname``, each
  with its compute's basis as its source. Everything else is nova's and
  the package's own path: the hook at each ``_update`` (claims and the
  periodic audit), ``ComputeNode.stats`` saved to nova's database,
  ``HostState.stats`` in the scheduler, the weigher.

The weigher's cost is measured where nova calls it
(``OneToOneWeigher.weigh_objects``, once per scheduling request), and
nova's whole weighing beside it (``HostWeightHandler.get_weighed_objects``
with every weigher), in CPU time of the calling thread and wall time.
The results are written to ``$NPH_NOVA_WEIGHER_TABLE`` when set
(doc/source/reference/nova-integration.rst and reference/performance.rst show
them).

``NPH_TEST_WEIGHER_NEUTRAL=1`` runs the same tests with the weigher's
scoring disabled (``weigher.scores`` neutral for every host): the
sequence and the bursts must fail. ``NPH_TEST_WEIGHER_SEED`` and
``NPH_TEST_WEIGHER_LOAD`` run another sequence than the one asserted
(seed 41, load 1.0); ``NPH_TEST_WEIGHER_BURST_SEED`` and
``NPH_TEST_WEIGHER_BURST_LOAD`` another burst sequence (seed 7, load
1.1), ``NPH_TEST_WEIGHER_BURST_HOSTS`` on another number of computes (4)
and ``NPH_TEST_WEIGHER_BURSTS`` in other burst sizes (``2,4,8``: one
test each; ``N@H`` bursts of N on H computes; ``2,4@10``);
``NPH_NOVA_WEIGHER_BURSTS`` names a file each burst test appends
its figures to (one JSON line). ``NPH_TEST_WEIGHER_SPREAD_BELOW`` sets
``[nova_pinning] weigher_spread_below`` for every test but
``test_spread_below_leaves_novas_choices``, which sets its own
(``NPH_TEST_WEIGHER_SPREAD_OPTION``, 0.7; 0 must fail it).

Parallel requests (``test_bursts_of_N``): nova's framework starts one
scheduler service and refuses a second; ``SchedulerWorkers`` adds a
second ``SchedulerManager`` with its own ``HostManager`` (its own
``HostState`` objects, as a second nova-scheduler worker process has)
and routes the requests to the two in turn, and ``BurstGate`` holds the
computes' builds until every request of a burst is scheduled, and each
request's ``consume_from_request`` until every request of the burst is
weighed: the burst's N API calls are weighed on one view, none seeing
another's choice (the fleet model's "one worker a request"), before any
of their claims reaches nova's database. Each server's uuid is made from
its name (``ServerUuids``): the weigher's draw is the request's own. The
passes wait until the burst's builds are done (``EnginePasses.held``),
so that the pass after them plans them together, homes in the engine's
order (largest first, then uuid), not in the order the threads built
them; and nova's weighers get the hosts in the order of their names, so
that nova's exact ties fall alike (without it the same sequence gave 33
and 42 one-to-one vCPUs in bursts of 2: reference/nova-integration.rst).
Bursts of 2 on four computes and of 4 on ten run by default. Bursts
as large as the fleet (``NPH_TEST_WEIGHER_BURSTS=4,8`` on four
computes) fail: nova's default then sends each burst to the one
emptiest host, which on four hosts at this load sacrifices one host and
keeps the others within their pools, and keeps more one-to-one than the
weigher (reference/nova-integration.rst, "Bursts inside nova", has
them, six computes at load 1.3 over seven seeds, and ten computes,
where bursts of 4 won 7 seeds of 10 and bursts of 8 and 16 won 5 of 5
in vCPUs; the fleet model measures bursts on 40 hosts).
"""

import collections
import json
import os
import random
import statistics
import threading
import time
import types
import uuid as uuid_mod

import fixtures
from nova import conf as nova_conf
from nova import context as nova_context
from nova import objects
from nova import utils as nova_utils
from nova.scheduler import weights as nova_weights
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional import integrated_helpers
from nova.tests.functional.libvirt import base

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import guest as guest_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.engine import topology
from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.nova import hookpoints
from nova_pinning_hooks.nova import hooks
from nova_pinning_hooks.nova import nodesummary
from nova_pinning_hooks.nova import weigher
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.passes import settings as settings_mod
from tests import passmodel
from tests.fixtures import uninstall_migration_filter

CONF = nova_conf.CONF
KEY = summary_mod.KEY
RATIO = 4.0
HOSTS = 4
NODES, CORES, THREADS = 2, 4, 2  # a compute: 16 pCPUs, 8 a node
PCPUS = NODES * CORES * THREADS
NODE_KIB = 32 * 1024 * 1024
MIB_PER_VCPU = 1024
FLAVORS = ((1, 30), (2, 30), (4, 25), (8, 15))  # vCPUs, weight (%)
# The sequence's seed, and its load (the guests' vCPUs over the
# computes' pCPUs, at least); others for exploring (the assertions may
# then fail: doc/source/reference/performance.rst).
SEED = int(os.environ.get('NPH_TEST_WEIGHER_SEED', '41'))
LOAD = float(os.environ.get('NPH_TEST_WEIGHER_LOAD', '1.0'))
# Bursts: requests posted to the API at once, weighed by two scheduler
# workers before any of their claims reaches nova's database (the
# computes' builds wait until the whole burst is scheduled). The
# sequence's seed and load, and the burst sizes tried (one test each).
BURST_SEED = int(os.environ.get('NPH_TEST_WEIGHER_BURST_SEED', '7'))
BURST_LOAD = float(os.environ.get('NPH_TEST_WEIGHER_BURST_LOAD', '1.1'))
BURST_HOSTS = int(os.environ.get('NPH_TEST_WEIGHER_BURST_HOSTS', '4'))


def _burst(entry):
    """A burst size, or ``N@H``: (N, H computes; BURST_HOSTS)."""
    size, _, hosts = entry.partition('@')
    return int(size), int(hosts or BURST_HOSTS)


BURSTS = [_burst(entry) for entry in os.environ.get(
    'NPH_TEST_WEIGHER_BURSTS', '2,4@10').split(',')]
SCHEDULER_WORKERS = 2
# weigher_spread_below in test_spread_below_leaves_novas_choices, and the
# load its sequence stops at.
SPREAD_OPTION = float(os.environ.get('NPH_TEST_WEIGHER_SPREAD_OPTION', '0.7'))
SPREAD_LOAD = 0.55
# weigher_spread_below in every other test (the package's default unless
# set: exploring).
_SPREAD = os.environ.get('NPH_TEST_WEIGHER_SPREAD_BELOW')
SPREAD_BELOW = None if _SPREAD is None else float(_SPREAD)
DEFAULT_WEIGHERS = ['nova.scheduler.weights.all_weighers']
WITH_WEIGHER = DEFAULT_WEIGHERS + [
    'nova_pinning_hooks.nova.weigher.OneToOneWeigher']


# Each server's uuid made from its name (``ServerUuids``).
UUID_NAMESPACE = uuid_mod.UUID('5b7c7f4e-1d0a-4c6e-9a53-0b8f2c1d4e77')


class ServerUuids:
    """nova gives a new server a random uuid, and the weigher's draw is
    the request's own (its instance uuid): the uuid each server gets is
    made from its name here (uuid5), so that a sequence's draws, and its
    result, are the same at every run; a test's outcome must not depend
    on luck. The name is the posting thread's (the API call runs in the
    thread that makes it); nova's other uuids stay random."""

    def __init__(self):
        self.local = threading.local()
        from nova.compute import api
        real = api.uuidutils

        def generate_uuid(dashed=True):
            name = getattr(self.local, 'name', None)
            if name is None:
                return real.generate_uuid(dashed=dashed)
            self.local.name = None
            value = uuid_mod.uuid5(UUID_NAMESPACE, name)
            return str(value) if dashed else value.hex
        self.module = types.SimpleNamespace(
            **{k: getattr(real, k) for k in dir(real)
               if not k.startswith('__')})
        self.module.generate_uuid = generate_uuid

    @staticmethod
    def of(name):
        return str(uuid_mod.uuid5(UUID_NAMESPACE, name))


def sequence(seed=SEED, load=LOAD, hosts=HOSTS):
    """The boots, in vCPUs: flavors drawn from ``FLAVORS`` until their
    vCPUs reach ``load`` times the ``hosts`` computes' pCPUs."""
    rnd = random.Random(seed)
    sizes, weights = zip(*FLAVORS)
    out = []
    while sum(out) < load * hosts * PCPUS:
        out.append(rnd.choices(sizes, weights)[0])
    return out


SEQUENCE = sequence()


class ComputeHost:
    """What one compute's passes see and keep: its topology, its guests
    (pins and memory placement carried from plan to plan), the last plan
    and its ``summary.Basis``."""

    def __init__(self, name, connection, options):
        self.name = name
        self.connection = connection
        self.topology = topology.HostTopology.from_capabilities(
            connection.getCapabilities())
        self.options = options
        self.guests = {}  # uuid -> guest_mod.Guest
        self.plan = policy.make_plan(self.topology, [], options)
        self.basis = None

    def run_pass(self):
        """Read the running domains, plan, keep the basis."""
        guests = {}
        for dom in self.connection.listAllDomains(
                fakelibvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            uuid = dom.UUIDString()
            memory_kib = dom.info()[1]
            # (nova's fake gives info()'s vCPU count as a dict.)
            vcpus = len(dom.vcpus()[0])
            guests[uuid] = self.guests.get(uuid) or guest_mod.Guest(
                uuid, dom.name(), True, tuple(range(vcpus)), {}, None,
                None, {}, None, None, int(memory_kib), True, False, {})
        self.guests = guests
        self.replan()
        self.basis = summary_mod.basis(
            self.topology, list(self.guests.values()), self.plan,
            self.options, time.time())

    def replan(self):
        """``policy.make_plan``, the pins written, a new guest's memory
        placed (``tests/passmodel.py``, ``benchmarks/fleet.py``'s
        model)."""
        self.plan = passmodel.replan(self.topology, self.guests,
                                     self.options,
                                     sorted(self.topology.nodes))

    def one_to_one(self):
        """(guests, vCPUs) one-to-one in the last plan."""
        dedicated = [gp for gp in self.plan.guests
                     if gp.mode == plan_mod.DEDICATED]
        return len(dedicated), sum(self.guests[gp.uuid].vcpu_count
                                   for gp in dedicated)

    def vcpus(self):
        return sum(g.vcpu_count for g in self.guests.values())


class EnginePasses:
    """Stands in for the reconciler of the package's pass thread: each
    pass plans every compute (``ComputeHost.run_pass``)."""

    def __init__(self, computes):
        self.computes = computes
        self.calls = {}
        self.passes = 0
        self.lock = threading.Lock()

    def host(self):
        return self  # stands in for virt.Host too (events: none)

    def watch(self, model, on_change):
        pass

    def vcpu_counts(self):
        return {}

    def run_pass(self, **kwargs):
        with self.lock:
            if self.held():
                # A burst's builds land before their pass: the pass
                # after them plans them together, as a compute whose
                # builds arrive within one pass's time does, and the
                # homes then follow the guests (largest first, then
                # uuid), not the order the threads built them in.
                return reconciler.PassResult()
            for compute in list(self.computes.values()):
                compute.run_pass()
            self.passes += 1
        return reconciler.PassResult()

    @staticmethod
    def held():
        return False

    def close(self):
        pass


class PerNodeReporter:
    """In ``activation._REPORTER``'s place: one ``nodesummary.Reporter``
    a compute node, its source that compute's last basis."""

    def __init__(self, computes, max_age):
        self.computes = computes
        self.max_age = max_age
        self.reporters = {}
        self.updates = collections.Counter()
        # node -> how its text is rewritten (a compute of another
        # release: test_summaries_of_other_releases)
        self.rewrite = {}

    def _source(self, node):
        compute = self.computes.get(node)
        return None if compute is None else compute.basis

    def update(self, compute_node, tracked):
        node = compute_node.hypervisor_hostname
        reporter = self.reporters.get(node)
        if reporter is None:
            reporter = self.reporters[node] = nodesummary.Reporter(
                lambda: self._source(node), self.max_age)
        self.updates[node] += 1
        text = reporter.update(compute_node, tracked)
        if text is not None and node in self.rewrite:
            text = self.rewrite[node](text)
            stats = compute_node.stats
            stats[KEY] = text
            compute_node.stats = stats
        return text


class Countdown:
    """An event set once ``count`` things have happened (set while
    nothing is expected)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.left = 0
        self.done = threading.Event()
        self.done.set()

    def expect(self, count):
        with self.lock:
            self.left = count
            self.done.clear()

    def one(self):
        with self.lock:
            self.left -= 1
            if self.left <= 0:
                self.done.set()


class BurstGate:
    """Holds the computes' builds until every request of a burst has been
    scheduled: none of the burst's claims reaches nova's database before
    the last of them is weighed (a burst weighed on one view). And holds
    each request's ``HostState.consume_from_request`` until every request
    of the burst has been weighed: none sees another's choice, as
    requests weighed at once by several workers (or interleaved in one)
    do not, whatever the threads' timing on a busy machine; without it,
    nova's own weighers saw some of a burst's choices and not others
    from run to run (16 and 25 one-to-one vCPUs in two runs of one
    sequence)."""

    def __init__(self):
        self.scheduled = Countdown()
        self.weighed = Countdown()
        self.held = 0  # builds that waited
        self.building = False  # a burst's builds not all done yet

    def expect(self, count):
        self.scheduled.expect(count)
        self.weighed.expect(count)
        self.building = True

    def weighed_one(self):
        self.weighed.one()

    def before_consume(self):
        self.weighed.done.wait(60)

    def scheduled_one(self):
        self.scheduled.one()

    def wait(self):
        if not self.scheduled.done.is_set():
            self.held += 1
        self.scheduled.done.wait(60)


class SchedulerWorkers:
    """Two scheduler workers. nova's framework starts one scheduler
    service (a second ``start_service('scheduler')`` is refused); a
    second ``SchedulerManager``, with its own ``HostManager`` and so its
    own ``HostState`` objects (what a second nova-scheduler worker
    process has), takes every other request."""

    def __init__(self, first, gate):
        from nova.scheduler import manager
        self.managers = [first, manager.SchedulerManager()]
        self.served = collections.Counter()
        self.gate = gate
        self.lock = threading.Lock()
        self.calls = 0
        self.real = manager.SchedulerManager.select_destinations

    def select_destinations(self, _manager, *args, **kwargs):
        with self.lock:
            worker = self.calls % len(self.managers)
            self.calls += 1
        self.served[worker] += 1
        try:
            return self.real(self.managers[worker], *args, **kwargs)
        finally:
            self.gate.scheduled_one()


class WeigherTest(base.ServersTestBase,
                  integrated_helpers.InstanceHelperMixin):
    microversion = 'latest'
    ADMIN_API = True

    def setUp(self):
        # nova's scheduler loads its weighers when it starts (in
        # super().setUp()): ours, by class path, beside nova's.
        self.flags(weight_classes=WITH_WEIGHER, group='filter_scheduler')
        self.flags(cpu_allocation_ratio=RATIO)
        # Both runs' guests in one project.
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        conf_mod.register_opts(CONF)
        if SPREAD_BELOW is not None:
            self.flags(weigher_spread_below=SPREAD_BELOW,
                       group='nova_pinning')
        super().setUp()
        self.computes_by_name = {}
        self._switch_on()
        self._time_weighing()
        self.gate = BurstGate()
        self.passes.held = lambda: self.gate.building
        self.workers = None
        self.uuids = ServerUuids()
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.api.uuidutils', self.uuids.module))
        self.flavors = {
            vcpus: self._create_flavor(
                name='v%d' % vcpus, vcpu=vcpus,
                memory_mb=vcpus * MIB_PER_VCPU, disk=0, ephemeral=0)
            for vcpus, _ in FLAVORS}
        # The image nova's _build_server takes when given none.
        with nova_utils.temporary_mutation(self.api, microversion='2.35'):
            self.image = self.api.get_images()[0]['id']

    def _get_connection(self, host_info=None, *args, **kwargs):
        # nova's sanity check wants fewer than the 16 CPUs it mocks as
        # online (Host.get_online_cpus: 0-15); 16 match them exactly.
        check = self.assertGreater
        self.assertGreater = lambda *a, **k: None
        try:
            return super()._get_connection(host_info, *args, **kwargs)
        finally:
            self.assertGreater = check

    def _switch_on(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        conf_mod.register_opts(CONF)
        self.flags(group='nova_pinning',
                   overcommit_file=os.path.join(tmp, 'overcommit.json'),
                   lock_path=tmp, coalesce_delay=0, periodic_interval=0,
                   vcpu_poll_interval=0)
        self.flags(driver=['nova_pinning'],
                   group='oslo_messaging_notifications')
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.passrunner.eventlet_patched',
lambda: False))
        self.passes = EnginePasses(self.computes_by_name)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.passes.reconciler.Reconciler',
            lambda conf, connect=None, model=None: self.passes))
        if os.environ.get('NPH_TEST_WEIGHER_NEUTRAL'):
            # The weigher's scoring disabled: the test must fail.
            self.useFixture(fixtures.MonkeyPatch(
                'nova_pinning_hooks.nova.weigher.scores',
                lambda candidates, *rest: [weigher.NEUTRAL] * len(
                    candidates)))
        # What the notification driver's __init__ calls in nova-compute.
        self.agent = activation.activate(CONF)
        self.assertIsNotNone(self.agent)
        self.addCleanup(self._switch_off)
        self.assertIsNotNone(activation._REPORTER)  # the hook installed
        self.reporter = PerNodeReporter(
            self.computes_by_name, CONF.nova_pinning.summary_max_age)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.activation._REPORTER', self.reporter))

    def _switch_off(self):
        activation.deactivate()
        from nova.compute import manager
        from nova.compute import resource_tracker
        from nova.virt.libvirt import driver
        hookpoints.uninstall(manager.ComputeManager, 'bind_numa_affinity')
        hookpoints.uninstall(driver.LibvirtDriver, activation.RATIO_HOOK)
        hookpoints.uninstall(resource_tracker.ResourceTracker,
                             activation.SUMMARY_HOOK)
        uninstall_migration_filter()
        hooks.reset()

    def _time_weighing(self):
        """Each scheduling request's weighing, ours and nova's whole."""
        self.ours, self.whole = [], []
        ours = weigher.OneToOneWeigher.weigh_objects
        whole = nova_weights.HostWeightHandler.get_weighed_objects

        def timed_ours(w, objs, spec):
            cpu, wall = time.thread_time(), time.perf_counter()
            weights = ours(w, objs, spec)
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            # What each host reported (decoded later, off the clock of
            # nova's weighing).
            self.ours.append({
                'cpu': cpu, 'wall': wall, 'hosts': len(objs),
                'weights': list(weights),
                'reported': {o.obj.host: (
                    (o.obj.stats or {}).get(KEY), o.obj.vcpus_used)
                    for o in objs}})
            return weights

        def timed_whole(handler, weighers, objs, spec):
            cpu, wall = time.thread_time(), time.perf_counter()
            try:
                return whole(handler, weighers, objs, spec)
            finally:
                self.whole.append({
                    'cpu': time.thread_time() - cpu,
                    'wall': time.perf_counter() - wall,
                    'hosts': len(objs), 'weighers': len(weighers)})
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.weigher.OneToOneWeigher.weigh_objects',
            timed_ours))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.weights.HostWeightHandler.get_weighed_objects',
            timed_whole))

    # -- one run -----------------------------------------------------------

    def _settle(self):
        self.assertTrue(self.agent.coalescer.request('settle', wait=True,
                                                     timeout=60))

    def _boot(self, name, vcpus):
        """One server, once ACTIVE. nova's ``_create_server`` polls every
        0.5 s and looks the image up at each boot: polled here every 50 ms,
        the image looked up once (``setUp``), the test takes about a third
        less time."""
        return self._until_active(self._post(name, vcpus))

    def _post(self, name, vcpus):
        body = self._build_server(name=name, image_uuid=self.image,
                                  flavor_id=self.flavors[vcpus],
                                  networks='none')
        self.uuids.local.name = name
        server = self.api.post_server({'server': body})
        self.assertEqual(ServerUuids.of(name), server['id'])
        return server

    def _post_at_once(self, names, sizes):
        """The API calls of a burst, each from its own thread: nova's
        framework makes every RPC cast a call, so a post returns only
        once its build has reached the compute (held by the gate until
        the whole burst is scheduled)."""
        if len(names) == 1:
            return [self._post(names[0], sizes[0])]
        got, failed = [None] * len(names), []

        def post(i):
            try:
                got[i] = self._post(names[i], sizes[i])
            except Exception as exc:  # re-raised below, in the test
                failed.append(exc)
        threads = [threading.Thread(target=post, args=(i,))
                   for i in range(len(names))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        if failed:
            raise failed[0]
        self.assertNotIn(None, got)
        return got

    def _until_active(self, server):
        deadline = time.monotonic() + 60
        while server.get('status') != 'ACTIVE':
            self.assertNotEqual('ERROR', server.get('status'), server)
            self.assertLess(time.monotonic(), deadline, server)
            time.sleep(0.05)
            server = self.api.get_server(server['id'])
        return server

    def _use_weighers(self, classes):
        """nova's scheduler with these weighers, loaded as it loads them
        at its start (``HostManager.__init__``)."""
        self.flags(weight_classes=classes, group='filter_scheduler')
        managers = [self.scheduler.manager] + (
            self.workers.managers[1:] if self.workers else [])
        for m in managers:
            hm = m.host_manager
            hm.weighers = [
                cls() for cls in hm.weight_handler.get_matching_classes(
                    CONF.filter_scheduler.weight_classes)]
        return [type(w).__name__
                for w in self.scheduler.manager.host_manager.weighers]

    def _hosts_by_name(self, then=lambda: None):
        """nova's weighers get the hosts in the order of their names, so
        that nova's exact ties (it keeps the first of equal weights) fall
        alike at every run instead of in the order placement listed the
        hosts (33 and 42 one-to-one vCPUs in two runs of one sequence
        without it); ``then`` after each weighing."""
        weigh = nova_weights.HostWeightHandler.get_weighed_objects

        def weighed(handler, weighers, objs, *args, **kwargs):
            objs = sorted(objs, key=lambda o: str(getattr(o, 'host', '')))
            try:
                return weigh(handler, weighers, objs, *args, **kwargs)
            finally:
                then()
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.weights.HostWeightHandler.get_weighed_objects',
            weighed))

    def _two_workers(self):
        """Two scheduler workers, and the computes' builds held until a
        burst is scheduled."""
        workers = self.workers = SchedulerWorkers(self.scheduler.manager,
                                                  self.gate)

        def routed(manager, *args, **kwargs):
            return workers.select_destinations(manager, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.manager.SchedulerManager.select_destinations',
            routed))
        from nova.compute import manager
        build = manager.ComputeManager.build_and_run_instance
        gate = self.gate

        def held_build(compute, *args, **kwargs):
            gate.wait()
            return build(compute, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.manager.ComputeManager.build_and_run_instance',
            held_build))
        # Every request of a burst weighed before any consumes its host.
        self._hosts_by_name(gate.weighed_one)
        from nova.scheduler import host_manager
        consume = host_manager.HostState.consume_from_request

        def held_consume(state, *args, **kwargs):
            gate.before_consume()
            return consume(state, *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.host_manager.HostState.consume_from_request',
            held_consume))

    def run_boots(self, label, sequence=SEQUENCE, burst=1, hosts=HOSTS):
        """``hosts`` fresh computes, ``sequence`` booted (in bursts of
        ``burst`` posted at once); the plans."""
        names = ['%s%d' % (label, i) for i in range(1, hosts + 1)]
        info = fakelibvirt.HostInfo(
            cpu_nodes=NODES, cpu_sockets=1, cpu_cores=CORES,
            cpu_threads=THREADS, kB_mem=NODES * NODE_KIB)
        options = policy.Options(allocation_ratio=RATIO,
                                 **settings_mod.policy_overrides(CONF))
        for name in names:
            self.start_compute(hostname=name, host_info=info)
            self.computes_by_name[name] = ComputeHost(
                name, self.computes[name].driver._host.get_connection(),
                options)
        # Steady state: each compute planned and audited once (nova's
        # periodic update_available_resource), so that each reports its
        # summary before the first boot.
        self._settle()
        self._run_periodics()
        first_ours, first_whole = len(self.ours), len(self.whole)
        placed = []
        for start in range(0, len(sequence), burst):
            chunk = sequence[start:start + burst]
            if burst > 1:
                self.gate.expect(len(chunk))
            servers = self._post_at_once(
                ['%s-%d' % (label, start + i) for i in range(len(chunk))],
                chunk)
            servers = [self._until_active(server) for server in servers]
            self.gate.building = False  # the burst's pass may run now
            for server, vcpus in zip(servers, chunk):
                host = server['OS-EXT-SRV-ATTR:host']
                self.assertIn(host, names)
                placed.append((host, vcpus))
                # The pass after the build (the hook asked for it).
                deadline = time.monotonic() + 60
                while server['id'] not in \
                        self.computes_by_name[host].guests:
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.05)
                    self._settle()
        self._settle()
        self._run_periodics()  # every node reports its last pass
        per_host = {}
        for name in names:
            guests, vcpus = self.computes_by_name[name].one_to_one()
            per_host[name] = {
                'guests': len(self.computes_by_name[name].guests),
                'vcpus': self.computes_by_name[name].vcpus(),
                'one_to_one_guests': guests, 'one_to_one_vcpus': vcpus,
                'stats': self._node_stats(name)}
        for name in names:  # out of the next run's way
            service = self.api.get_services(
                host=name, binary='nova-compute')[0]
            self.api.put_service(service['id'], {'status': 'disabled'})
        return {'hosts': per_host, 'placed': placed,
                'ours': self.ours[first_ours:],
                'whole': self.whole[first_whole:],
                'one_to_one_guests': sum(
                    h['one_to_one_guests'] for h in per_host.values()),
                'one_to_one_vcpus': sum(
                    h['one_to_one_vcpus'] for h in per_host.values()),
                'guests': len(placed), 'vcpus': sum(sequence)}

    def _node_stats(self, name):
        """The summary saved with the compute node in nova's database."""
        ctx = nova_context.get_admin_context()
        with nova_context.target_cell(
                ctx, self.host_mappings[name].cell_mapping) as cctxt:
            node = objects.ComputeNode.get_by_nodename(cctxt, name)
        return node.stats.get(KEY)

    # -- the test ----------------------------------------------------------

    def test_more_one_to_one_with_the_weigher(self):
        loaded = [type(w).__name__
                  for w in self.scheduler.manager.host_manager.weighers]
        self.assertIn('OneToOneWeigher', loaded)
        self.assertIn('RAMWeigher', loaded)
        with_weigher = self.run_boots('weigher')
        loaded = self._use_weighers(DEFAULT_WEIGHERS)
        self.assertNotIn('OneToOneWeigher', loaded)
        self.assertIn('RAMWeigher', loaded)
        default = self.run_boots('default')
        self.write_table(with_weigher, default)

        # Every boot placed, on the run's own computes.
        for run in (with_weigher, default):
            self.assertEqual(len(SEQUENCE), run['guests'])
        # The summaries flowed per node through nova: each compute node
        # saved its own in nova's database (its guests' vCPUs, after the
        # last audit) ...
        for run in (with_weigher, default):
            for name, h in run['hosts'].items():
                self.assertIsNotNone(h['stats'], name)
                self.assertEqual(h['vcpus'],
                                 summary_mod.decode(h['stats']).seen, name)
        # ... and the scheduler read each host's own: at every request,
        # every candidate had one, behind what nova counts by the one
        # guest at most placed there since its last pass (the summary
        # of one host everywhere would be ahead of most).
        self.assertEqual(len(SEQUENCE), len(with_weigher['ours']))
        largest = max(vcpus for vcpus, _ in FLAVORS)
        for call in with_weigher['ours']:
            self.assertEqual(HOSTS, call['hosts'])
            for host, (text, vcpus_used) in call['reported'].items():
                self.assertIsNotNone(text, host)
                pending = vcpus_used - summary_mod.decode(text).seen
                self.assertLessEqual(0, pending, (host, text, vcpus_used))
                self.assertLessEqual(pending, largest,
                                     (host, text, vcpus_used))

        # More guests one-to-one with the weigher, and more vCPUs.
        got = (with_weigher['one_to_one_guests'],
               with_weigher['one_to_one_vcpus'])
        base_ = (default['one_to_one_guests'], default['one_to_one_vcpus'])
        message = ('one-to-one (guests, vCPUs) of %d guests, %d vCPUs: '
                   'with the weigher %s, nova\'s default weighers %s'
                   % (len(SEQUENCE), sum(SEQUENCE), got, base_))
        self.assertGreater(got[0], base_[0], message)
        self.assertGreater(got[1], base_[1], message)

        # The weigher scored (not neutral everywhere).
        self.assertTrue([w for call in with_weigher['ours']
                         for w in call['weights'] if w != weigher.NEUTRAL])
        # Its cost is measured (write_table), not asserted: the machine
        # is shared, and a time is no test's pass mark here.

    def _bursts(self, burst, hosts):
        """The burst sequence on ``hosts`` computes with the weigher,
        then with nova's default weighers, in bursts of ``burst`` on two
        scheduler workers."""
        self._two_workers()
        seq = sequence(BURST_SEED, BURST_LOAD, hosts)
        with_weigher = self.run_boots('weigher', seq, burst, hosts)
        loaded = self._use_weighers(DEFAULT_WEIGHERS)
        self.assertNotIn('OneToOneWeigher', loaded)
        default = self.run_boots('default', seq, burst, hosts)
        for run in (with_weigher, default):
            self.assertEqual(len(seq), run['guests'])
        # Both workers weighed requests (the gate held every build until
        # its burst was scheduled; 'held' counts those that had to wait,
        # 0 when the burst's posts were all scheduled first).
        self.assertEqual(2, len(self.workers.served))
        got = (with_weigher['one_to_one_guests'],
               with_weigher['one_to_one_vcpus'])
        base_ = (default['one_to_one_guests'], default['one_to_one_vcpus'])
        path = os.environ.get('NPH_NOVA_WEIGHER_BURSTS')
        if path:
            with open(path, 'a') as f:
                f.write(json.dumps({
                    'burst': burst, 'seed': BURST_SEED, 'load': BURST_LOAD,
                    'hosts': hosts,
                    'sequence': seq, 'workers': SCHEDULER_WORKERS,
                    'served': dict(self.workers.served),
                    'held': self.gate.held, 'weigher': got,
                    'default': base_,
                    'placed': {'weigher': with_weigher['placed'],
                               'default': default['placed']}}) + '\n')
        message = ('bursts of %d on %d computes, %d scheduler workers: '
                   'one-to-one (guests, vCPUs) of %d guests, %d vCPUs: '
                   'with the weigher %s, nova\'s default weighers %s'
                   % (burst, hosts, SCHEDULER_WORKERS, len(seq), sum(seq),
                      got, base_))
        self.assertGreater(got[1], base_[1], message)
        self.assertGreaterEqual(got[0], base_[0], message)

    # test_bursts_of_N for each N of BURSTS: below the class.

    def test_spread_below_leaves_novas_choices(self):
        """``[nova_pinning] weigher_spread_below = 0.7`` (nova's spread as
        it was at a low load): the sequence's start, up to
        ``SPREAD_LOAD`` of the computes' pCPUs (below the tenth where the
        bands come in), is weighed 0 on every host by ours and placed
        exactly as nova's default weighers place it. With the bands (the
        default, 0) the weights are not 0."""
        seq = sequence(SEED, SPREAD_LOAD, HOSTS)
        self._hosts_by_name()
        self.flags(weigher_spread_below=SPREAD_OPTION, group='nova_pinning')
        self.assertIn('OneToOneWeigher', self._use_weighers(WITH_WEIGHER))
        spread = self.run_boots('spread', seq)
        self._use_weighers(DEFAULT_WEIGHERS)
        default = self.run_boots('nova', seq)

        def where(run, label):
            return [(int(host[len(label):]), vcpus)
                    for host, vcpus in run['placed']]
        self.assertEqual(len(seq), len(spread['ours']))
        self.assertEqual({weigher.NEUTRAL}, {
            w for call in spread['ours'] for w in call['weights']})
        self.assertEqual(where(default, 'nova'), where(spread, 'spread'))

    def test_summaries_of_other_releases(self):
        """A scheduler of this release and computes of other releases, as
        the summaries cross nova (``ComputeNode.stats`` in nova's
        database, ``HostState.stats``): a compute older than the
        scheduler (version 1 with the pass time not first, as before
        this release) and one newer that keeps version 1's keys
        (``"c": 1``) weigh as the same summary in this release's form; a
        newer one that does not keep them weighs neutral, logged once.
        doc/source/admin/upgrades.rst: schedulers first."""
        def older(text):
            data = json.loads(text)
            return json.dumps({k: data[k] for k in ('v', 'r', 'x', 's',
                                                   't', 'n')},
                              separators=(',', ':'))

        def newer(text):
            data = json.loads(text)
            data.update(v=2, c=1, z=[1, 2, 3])
            return json.dumps(data, separators=(',', ':'))

        def foreign(text):
            data = json.loads(text)
            data.update(v=2, n=[[0, 1]])
            return json.dumps(data, separators=(',', ':'))
        # The bands alone: the request's draw among hosts alike would
        # part the weights of hosts with the same summary.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.engine.hostchoice.TIE_DRAW', 0.0))
        names = ['rel%d' % i for i in range(1, HOSTS + 1)]
        self.reporter.rewrite.update(
            {names[1]: older, names[2]: newer, names[3]: foreign})
        self.run_boots('rel', [2], 1)
        call = self.ours[-1]
        weights = dict(zip(list(call['reported']),
                           call['weights']))
        texts = {h: t for h, (t, _) in call['reported'].items()}
        self.assertNotIn('"t"', texts[names[1]][:5])
        self.assertIn('"c":1', texts[names[2]])
        self.assertIn('"v":2', texts[names[3]])
        # Each host had the same counts before the boot (an empty
        # compute, its summary read the same whatever the release).
        self.assertEqual(weigher.NEUTRAL, weights[names[3]])
        for name in names[1:3]:
            self.assertEqual(weights[names[0]], weights[name], weights)
        self.assertNotEqual(weigher.NEUTRAL, weights[names[0]])
        self.assertIn('%s (SummaryError: not a version 1 summary)'
                      % names[3], self.stdlog.logger.output)

    def write_table(self, with_weigher, default):
        path = os.environ.get('NPH_NOVA_WEIGHER_TABLE')
        if not path:
            return

        def ms(rows, key):
            values = [r[key] * 1000 for r in rows]
            if not values:
                return None
            return {'median': statistics.median(values),
                    'mean': statistics.fmean(values), 'max': max(values),
                    'per_host_median': statistics.median(
                        [r[key] * 1000 / max(r['hosts'], 1)
                         for r in rows])}

        out = {'sequence': SEQUENCE, 'seed': SEED, 'load': LOAD,
               'hosts': HOSTS, 'pcpus_per_host': PCPUS, 'ratio': RATIO,
               'runs': {}}
        for label, run in (('weigher', with_weigher),
                           ('default', default)):
            out['runs'][label] = {
                'one_to_one_guests': run['one_to_one_guests'],
                'one_to_one_vcpus': run['one_to_one_vcpus'],
                'guests': run['guests'], 'vcpus': run['vcpus'],
                'hosts': {n: {k: v for k, v in h.items() if k != 'stats'}
                          for n, h in run['hosts'].items()},
                'placed': run['placed'],
                'requests': len(run['whole']),
                'ours_cpu_ms': ms(run['ours'], 'cpu'),
                'ours_wall_ms': ms(run['ours'], 'wall'),
                'nova_weighing_cpu_ms': ms(run['whole'], 'cpu'),
                'nova_weighing_wall_ms': ms(run['whole'], 'wall')}
        with open(path, 'w') as f:
            json.dump(out, f, indent=1)


def _burst_test(burst, hosts):
    def test(self):
        self._bursts(burst, hosts)
    test.__name__ = 'test_bursts_of_%d' % burst
    if hosts != BURST_HOSTS:
        test.__name__ += '_on_%d_computes' % hosts
    test.__doc__ = ('The burst sequence in bursts of %d on %d computes.'
                    % (burst, hosts))
    return test


# One test a burst size (NPH_TEST_WEIGHER_BURSTS; by default bursts of 2
# on four computes and of 4 on ten).
for _burst, _hosts in BURSTS:
    _test = _burst_test(_burst, _hosts)
    setattr(WeigherTest, _test.__name__, _test)
del _burst, _hosts, _test
