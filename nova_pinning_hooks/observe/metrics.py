"""Prometheus metrics: what the binding does, and what guests feel.

``exposition(view, stats)`` renders, with ``prometheus_client``, the
Prometheus text format of a ``HostView`` (read by ``read_view``: the plan
of the host, one bulk sample of vCPU counters, the ratio in force and its
source, the isolation status the isolation agent published) and of the
passes so far (``passstats``).
The long-lived runners of passes (nova-compute's pass thread, the
``nova-pinning agent`` worker) count their passes and, with
``[nova_pinning] metrics_textfile`` set, write it after each pass for
node_exporter's textfile collector (``textfile``) and, with a listen
address (``agent --listen``, ``[nova_pinning] metrics_listen``), serve it
with their pass counters over HTTP (``endpoint``, ``httpserve``): one
scrape target per host; ``passmetrics`` holds the three together for
them. ``nova-pinning metrics`` prints it and ``nova-pinning exporter``
serves it (without pass counters: they run no pass). Pass counters live
as long as the process that counts them; a restart starts them again at
zero, which Prometheus' ``rate`` and ``increase`` take as a counter
reset.

Names follow Prometheus conventions (base units, ``_seconds``,
``_total`` for counters). The per-vCPU counters keep the stems of the
libvirt exporters' ``libvirt_domain_vcpu_time_seconds_total`` and
``libvirt_domain_vcpu_delay_seconds_total`` under this package's
``nova_pinning_`` prefix, so that both can be scraped from one host
without clashing, and the same PromQL works on either. Every per-guest
series carries ``uuid``, ``name`` (the libvirt domain name) and ``node``
(the guest's home node, ``none`` for cross-node or unplaced guests);
per-vCPU series add ``vcpu``.

Invariants:

* the counters are libvirt's cumulative counters as read, in seconds:
  no interval, no state kept between scrapes; a restarted guest's
  counters start again from zero, which Prometheus' ``rate`` handles;
* reading never writes anything to libvirt and takes one bulk call for
  all guests' vCPU counters; a part that cannot be read (libvirt down,
  no ratio) leaves its series out and sets ``nova_pinning_up`` to 0,
  never raises out of ``read_view``;
* reading never asks systemd: the isolation series come from the status
  the isolation agent publishes after each sweep
  (``isolation.report.published``: one small file), with its time and
  whether it is stale; a hung D-Bus costs a pass and a scrape nothing;
* concurrent scrapes of one endpoint share one read in flight
  (``LiveCollector``), never queue behind one another;
* ``nova_pinning_build_info{version="1.0.0"} 1`` names the installed
  release in every exposition, whatever could be read;
* a series a dashboard panel or an alert rule reads (``etc/``) is
  served from the start, at zero where nothing happened yet (every pin
  change result and kind, the isolation counts where isolation is not
  configured, the last pass time: 0 before the first pass), never
  absent on a quiet host.
"""

import dataclasses
import datetime
import time
import typing

from prometheus_client import core
from prometheus_client import exposition as prom_exposition
from prometheus_client import registry as prom_registry

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.isolation import report
from nova_pinning_hooks.isolation import statusfile
from nova_pinning_hooks.passes import hostport
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.observe import settings as observe_settings
from nova_pinning_hooks.passes import settings as settings_mod
from nova_pinning_hooks.observe import passstats
from nova_pinning_hooks.observe import singleflight
from nova_pinning_hooks.observe import version

PREFIX = 'nova_pinning_'


@dataclasses.dataclass
class HostView:
    # plan.Plan, or None when it could not be read
    plan: typing.Optional[plan_mod.Plan] = None
    # uuid -> {'name', 'vcpus'} (virt.vcpu_stats)
    sample: typing.Optional[hostport.VcpuSample] = None
    ratio_source: typing.Optional[str] = None
    # isolation.report.published(): the agent's status, never systemd
    isolation: typing.Optional[statusfile.Status] = None
    # {'written', 'boot'} (Unix times; written 0: missing or unusable),
    # None when [nova_pinning] allocation_ratio stands in for the file
    overcommit: typing.Optional[dict[str, float]] = None
    errors: list[str] = dataclasses.field(default_factory=list)


# Interrupts and one-to-one CPUs (isolation.kernelwork.status): served at 0
# where isolation is not configured, as the counts above.
KERNEL_WORK = (
    ('one_to_one_cpus', 'one_to_one_cpus', 'Host CPUs that one vCPU thread '
     'alone may run on (one-to-one), as the kernel has them.'),
    ('irqs_moved', 'irqs_moved', 'Interrupts the isolation agent keeps '
     'off one-to-one CPUs (their original CPU sets are recorded for '
     'undo).'),
    ('irqs_unmovable', 'irqs_refused', 'Interrupts whose CPU set the '
     'kernel refused to change (managed interrupts): they stay where the '
     'kernel put them.'),
    ('irqs_on_one_to_one', 'irqs_on_one_to_one', 'Interrupts whose CPU '
     'set still holds a one-to-one CPU.'),
    ('irqs_firing_on_one_to_one', 'irqs_firing_on_one_to_one',
     'Interrupts delivered on a one-to-one CPU between the last two '
     'readings of /proc/interrupts.'),
)


def _kernel_work(iso: typing.Mapping[str, typing.Any]
                 ) -> typing.Iterator[core.GaugeMetricFamily]:
    for name, key, text in KERNEL_WORK:
        value = iso.get(key)
        if isinstance(value, str):  # a CPU set
            try:
                value = len(cpuset.parse(value, allow_empty=True))
            except cpuset.CpusetError:
                value = 0
        elif isinstance(value, dict):
            value = len(value)
        family = core.GaugeMetricFamily(
            PREFIX + 'isolation_' + name, text)
        family.add_metric([], _count(value))
        yield family


def _count(value: object) -> int:
    """A count the agent published, as served: a non-negative integer,
    anything else 0 (a float, a list or a bool raised out of
    ``generate_latest`` or was served as a number: issue 60)."""
    if isinstance(value, int) and not isinstance(value, bool) and \
            value >= 0:
        return value
    return 0


def read_view(rec: reconciler.Reconciler,
              observe: observe_settings.ObserveSettings,
              plan: typing.Optional[plan_mod.Plan] = None,
              isolation: bool = True,
              settings: typing.Optional[settings_mod.HostSettings] = None
              ) -> HostView:
    """A HostView of the live host through reconciler ``rec``: its plan
    (``plan``, e.g. the one a pass just applied, or read and planned now:
    no pass, no write), one sample of vCPU counters, the ratio's source,
    the isolation agent's published status. Never raises: what failed is
    in ``errors``.

    The ratio and CPU sets (``settings.HostSettings``, the overcommit
    file's) are read once: a pass hands its own (``settings``), or they
    are read here, and the same serve the plan and the file's times."""
    view = HostView(plan=plan)
    try:
        if settings is None:
            settings = settings_mod.load(rec.config.ratio)
        view.ratio_source = settings.ratio_source
        if view.plan is None:
            _, view.plan, _ = rec.plan(settings=settings)
    except Exception as exc:
        view.errors.append('plan: %s: %s' % (type(exc).__name__, exc))
    try:
        view.sample = rec.vcpu_stats()[1]
    except Exception as exc:
        view.errors.append('vcpu stats: %s: %s' % (type(exc).__name__, exc))
    if isolation:
        # The agent's published status: one small file, never systemd
        # (up to 16 D-Bus calls of 30 s each, on nova-compute's pass
        # thread, before).
        view.isolation = report.published_in(observe.isolation_state_file)
    view.overcommit = overcommit_times(rec.config.ratio, settings)
    return view


def overcommit_times(source: settings_mod.RatioSource,
                     settings: typing.Optional[settings_mod.HostSettings]
                     ) -> typing.Optional[dict[str, float]]:
    """When the overcommit file was written (0: missing or unusable:
    ``settings`` None) and when the host booted, as Unix times; None when
    ``[nova_pinning] allocation_ratio`` stands in for the file. A file
    written before the boot was not rewritten by nova-compute since:
    stale."""
    if source.allocation_ratio is not None:
        return None
    written = 0.0  # no settings, no time or a bad one: unusable
    if settings is not None and settings.written_at is not None:
        try:
            stamp = datetime.datetime.fromisoformat(settings.written_at)
        except ValueError:
            stamp = None
        if stamp is not None:
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=datetime.UTC)
            written = stamp.timestamp()
    boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return {'written': written, 'boot': float(round(boot))}


def _node_label(node: typing.Optional[int]) -> str:
    return 'none' if node is None else str(node)


class _Collector:

    def __init__(self, view: HostView,
                 stats: typing.Optional[passstats.PassStats]) -> None:
        self.view, self.stats = view, stats

    def collect(self) -> typing.Iterator[core.Metric]:
        yield from self._host()
        yield from self._guests()
        yield from self._isolation()
        yield from self._overcommit()
        if self.stats is not None:
            yield from self._passes(self.stats)

    def _host(self) -> typing.Iterator[core.Metric]:
        # Which release runs here, the Prometheus way (an ``_info``
        # series, always 1, the version as a label): joined on
        # ``instance`` to any other series, or counted by version over a
        # fleet during an upgrade.
        yield core.InfoMetricFamily(
            PREFIX + 'build', 'The installed nova-pinning-hooks release.',
            value={'version': version.version_string()})
        up = core.GaugeMetricFamily(
            PREFIX + 'up', '1 if the plan and the vCPU counters of the host '
            'could be read for these metrics, else 0.')
        up.add_metric([], 0 if self.view.errors else 1)
        yield up
        p = self.view.plan
        if p is None:
            return
        ratio = core.GaugeMetricFamily(
            PREFIX + 'allocation_ratio', 'CPU allocation ratio in force, '
            'by where it comes from.', labels=['source'])
        ratio.add_metric([str(self.view.ratio_source or 'unknown')],
                         p.allocation_ratio)
        yield ratio
        pool = core.GaugeMetricFamily(
            PREFIX + 'node_pool_cpus', 'Host CPUs of the guest pool on '
            'each NUMA node.', labels=['node'])
        alloc = core.GaugeMetricFamily(
            PREFIX + 'node_allocatable_vcpus', 'vCPUs the node may carry: '
            'its pool times the allocation ratio.', labels=['node'])
        vcpus = core.GaugeMetricFamily(
            PREFIX + 'node_vcpus', 'vCPUs of the managed single-node '
            'guests homed on each NUMA node.', labels=['node'])
        for node, cpus in sorted(p.pool_by_node.items()):
            pool.add_metric([str(node)], len(cpus))
            alloc.add_metric([str(node)], len(cpus) * p.allocation_ratio)
            vcpus.add_metric([str(node)], p.node_vcpus.get(node, 0))
        yield pool
        yield alloc
        yield vcpus
        cross = core.GaugeMetricFamily(
            PREFIX + 'cross_node_vcpus', 'vCPUs of managed guests whose '
            'memory spans NUMA nodes.')
        cross.add_metric([], p.cross_node_vcpus)
        yield cross
        modes = core.GaugeMetricFamily(
            PREFIX + 'guests', 'Running guests by home node and binding '
            'mode.', labels=['node', 'mode'])
        counts: dict[tuple[str, str], int] = {}
        for gp in p.guests:
            key = (_node_label(gp.home_node), gp.mode)
            counts[key] = counts.get(key, 0) + 1
        for (label, mode), n in sorted(counts.items()):
            modes.add_metric([label, mode], n)
        yield modes

    def _guests(self) -> typing.Iterator[core.Metric]:
        p, sample = self.view.plan, self.view.sample
        plans = {gp.uuid: gp for gp in p.guests} if p else {}
        info = core.GaugeMetricFamily(
            PREFIX + 'guest_vcpus', 'vCPUs of each running guest, with its '
            'binding mode and home node.',
            labels=['uuid', 'name', 'node', 'mode'])
        for gp in sorted(plans.values(), key=lambda g: (g.name, g.uuid)):
            info.add_metric([gp.uuid, gp.name, _node_label(gp.home_node),
                             gp.mode], len(gp.vcpu_pins) or _vcpus(
                                 sample, gp.uuid))
        yield info
        yield _emulator_threads(plans)
        if sample is None:
            return
        labels = ['uuid', 'name', 'node', 'vcpu']
        run = core.CounterMetricFamily(
            PREFIX + 'vcpu_time_seconds', 'Time each vCPU thread ran on a '
            'host CPU (libvirt vcpu.N.time).', labels=labels)
        delay = core.CounterMetricFamily(
            PREFIX + 'vcpu_delay_seconds', 'Time each vCPU thread was '
            'runnable but waited for a host CPU: the guest\'s steal time '
            '(libvirt vcpu.N.delay).', labels=labels)
        g_run = core.CounterMetricFamily(
            PREFIX + 'guest_cpu_seconds', 'Time all vCPUs of a guest ran.',
            labels=labels[:3])
        g_delay = core.CounterMetricFamily(
            PREFIX + 'guest_steal_seconds', 'Time all vCPUs of a guest '
            'waited for a host CPU (sum of vcpu_delay_seconds).',
            labels=labels[:3])
        for uuid, entry in sorted(sample.items()):
            planned = plans.get(uuid)
            base = [uuid, entry.get('name', ''),
                    _node_label(planned.home_node if planned else None)]
            total_run = total_delay = 0
            for index, c in sorted(entry.get('vcpus', {}).items()):
                run.add_metric(base + [str(index)], c['time'] / 1e9)
                delay.add_metric(base + [str(index)], c['delay'] / 1e9)
                total_run += c['time']
                total_delay += c['delay']
            g_run.add_metric(base, total_run / 1e9)
            g_delay.add_metric(base, total_delay / 1e9)
        yield from (run, delay, g_run, g_delay)

    def _isolation(self) -> typing.Iterator[core.Metric]:
        iso = self.view.isolation
        if iso is None:  # not asked for (a unit test of another part)
            return
        if not isinstance(iso, dict):
            iso = {}
        applied = core.GaugeMetricFamily(
            PREFIX + 'isolation_applied', '1 if host processes are '
            'confined to the reserved CPUs (nova-pinning-isolate), by '
            'backend.', labels=['mode'])
        applied.add_metric([str(iso.get('applied_mode') or
                                iso.get('mode') or 'none')],
                           1 if iso.get('state') == 'applied' else 0)
        yield applied
        # Served even where isolation is not configured (0: nothing
        # should be confined), so that the panel and the drift alert
        # read 0, not "No data". systemd counts units, v1 processes.
        unit = 'units' if (iso.get('applied_mode') or
                           iso.get('mode')) == 'systemd' else 'processes'
        for key, value, what in (
                ('confined', iso.get('confined'),
                 'confined to the reserved CPUs'),
                ('not_confined', iso.get('not_confined'),
                 'that should be confined but are not')):
            family = core.GaugeMetricFamily(
                PREFIX + 'isolation_%s_%s' % (key, unit),
                'Host %s %s.' % (unit, what))
            family.add_metric([], _count(value))
            yield family
        yield from _kernel_work(iso)
        written = iso.get('status_written')
        stamp = core.GaugeMetricFamily(
            PREFIX + 'isolation_status_timestamp_seconds', 'When the '
            'isolation agent last published its status, read by these '
            'metrics (Unix time; 0: none published).')
        stamp.add_metric([], float(written) if isinstance(
            written, (int, float)) and not isinstance(written, bool)
            else 0.0)
        yield stamp
        stale = core.GaugeMetricFamily(
            PREFIX + 'isolation_status_stale', '1 if the isolation '
            'agent\'s status is older than %d of its sweeps (watch is not '
            'running, or stuck), or unreadable: the other isolation '
            'series are as it last published them.'
            % statusfile.STALE_SWEEPS)
        stale.add_metric([], 1 if iso.get('status_stale') is True else 0)
        yield stale

    def _overcommit(self) -> typing.Iterator[core.Metric]:
        oc = self.view.overcommit
        if oc is None:
            return
        written = core.GaugeMetricFamily(
            PREFIX + 'overcommit_file_timestamp_seconds', 'When '
            'nova-compute last wrote the overcommit file (Unix time; 0: '
            'missing or unusable, passes cannot run).')
        written.add_metric([], oc['written'])
        boot = core.GaugeMetricFamily(
            PREFIX + 'host_boot_time_seconds', 'When the host booted '
            '(Unix time): an overcommit file older than this was not '
            'rewritten by nova-compute since.')
        boot.add_metric([], oc['boot'])
        yield written
        yield boot

    def _passes(self, s: passstats.PassStats
                ) -> typing.Iterator[core.Metric]:
        with s._lock:
            passes = core.CounterMetricFamily(
                PREFIX + 'passes', 'Rebinding passes run in nova-compute, '
                'by outcome.', labels=['outcome'])
            for outcome in passstats.OUTCOMES:
                passes.add_metric([outcome], s.passes[outcome])
            duration = core.SummaryMetricFamily(
                PREFIX + 'pass_duration_seconds', 'Time passes took.',
                count_value=sum(s.passes.values()),
                sum_value=s.seconds_sum)
            changes = core.CounterMetricFamily(
                PREFIX + 'pin_changes', 'Pin changes planned by passes, '
                'by result (applied, skipped) and kind (vcpu, emulator, '
                'iothread, numa).', labels=['result', 'kind'])
            for (result, kind), n in sorted(s.changes.items()):
                changes.add_metric([result, kind], n)
            calls = core.CounterMetricFamily(
                PREFIX + 'libvirt_calls', 'libvirt calls made by passes, '
                'vCPU count polls and memory-home moves, by kind (read, '
                'write).', labels=['kind'])
            for kind, n in sorted(s.calls.items()):
                calls.add_metric([kind], n)
            polls = core.CounterMetricFamily(
                PREFIX + 'vcpu_polls', 'vCPU count polls run (libvirt '
                'raises no event for a vCPU hot-plug); their calls are '
                'in libvirt_calls_total.')
            polls.add_metric([], s.polls)
            # 0 until the first pass: "never", which the alert on
            # passes not running sees as long ago, as it should.
            last = core.GaugeMetricFamily(
                PREFIX + 'last_pass_timestamp_seconds', 'When the last '
                'pass ended (Unix time; 0: no pass yet).')
            last.add_metric([], s.last_timestamp or 0.0)
            moves = core.CounterMetricFamily(
                PREFIX + 'memory_home_moves', 'Moves of arrived (migrated '
                'in, restored) guests\' memory to their home node, by '
                'result (moved, no-room, too-large, timeout, failed, '
                'gone).',
                labels=['result'])
            for result in passstats.MOVE_RESULTS:
                moves.add_metric([result], s.memory_home.get(result, 0))
            families = [passes, duration, changes, calls, polls, moves,
                        last]
            if s.last_timestamp is not None:
                ok = core.GaugeMetricFamily(
                    PREFIX + 'last_pass_success', '1 if the last pass '
                    'wrote every change it planned.')
                ok.add_metric([], 1 if s.last_ok else 0)
                families.append(ok)
        yield from families


def _emulator_threads(plans: typing.Mapping[str, plan_mod.GuestPlan]
                      ) -> core.GaugeMetricFamily:
    """Where each managed guest's emulator and I/O threads may run
    (``cpus``) and why (``rule``, ``emuthreads``): 1 per guest."""
    family = core.GaugeMetricFamily(
        PREFIX + 'guest_emulator_threads', 'Where each managed guest\'s '
        'emulator and I/O threads run (cpus) and by which rule '
        '(with-vcpus, pool-free, node-pool-fallback): always 1.',
        labels=['uuid', 'name', 'node', 'rule', 'cpus'])
    for gp in sorted(plans.values(), key=lambda g: (g.name, g.uuid)):
        if gp.emulator_rule is not None:
            family.add_metric([gp.uuid, gp.name, _node_label(gp.home_node),
                               gp.emulator_rule,
                               cpuset.format(gp.emulator_pin)], 1)
    return family


def _vcpus(sample: typing.Optional[hostport.VcpuSample], uuid: str) -> int:
    if not sample or uuid not in sample:
        return 0
    return len(sample[uuid].get('vcpus', {}))


def exposition(view: HostView,
               stats: typing.Optional[passstats.PassStats] = None) -> str:
    """The Prometheus text exposition (str) of ``view`` and ``stats``."""
    registry = prom_registry.CollectorRegistry(auto_describe=False)
    registry.register(_Collector(view, stats))
    text: bytes = prom_exposition.generate_latest(registry)
    return text.decode('utf-8')


class LiveCollector:
    """For the HTTP endpoint: a fresh HostView at every scrape, through
    one reconciler (its libvirt connection is kept between scrapes),
    with the pass counters ``stats`` of the process when it runs passes
    (the agent, nova-compute). There the plan is the last pass's (passes
    follow libvirt's events), so a scrape costs one libvirt call, the
    bulk sample of vCPU counters, as the textfile written after the pass
    does; before the first pass, and for the exporter, the host is read
    and planned at each scrape.

    One read at a time, shared: a scrape that arrives while a read is in
    flight waits for that read and answers with it (single-flight), so
    concurrent scrapes end together instead of one read after another
    (5 scrapes of a 2 s read ended at 2, 4, 6, 8 and 10 s before)."""

    def __init__(self, rec: reconciler.Reconciler,
                 observe: observe_settings.ObserveSettings,
                 stats: typing.Optional[passstats.PassStats] = None
                 ) -> None:
        self.rec, self.observe, self.stats = rec, observe, stats
        self._flight: singleflight.SingleFlight[HostView] = \
            singleflight.SingleFlight()

    def _read(self) -> HostView:
        plan = self.stats.last_plan if self.stats is not None else None
        return read_view(self.rec, self.observe, plan=plan)

    def collect(self) -> typing.Iterator[core.Metric]:
        view = self._flight.do(self._read)
        yield from _Collector(view, self.stats).collect()

    def render(self) -> bytes:
        """The exposition (bytes) of one scrape."""
        registry = prom_registry.CollectorRegistry(auto_describe=False)
        registry.register(self)
        text: bytes = prom_exposition.generate_latest(registry)
        return text
