"""The long-lived binding service: model, events, coalescer, timer, polls.

``BindingService`` keeps one libvirt connection and one
``model.HostModel`` for as long as it runs. libvirt's domain events (and
the connection's close) mark the model and request a pass through a
``coalescer.Coalescer``, so a change nobody told us about (a guest
started with virsh, a pin changed by hand, libvirtd restarted) is
corrected within about ``coalesce_delay`` plus one pass, not at the next
timed pass. Each pass reads only what the model cannot vouch for
(``reconciler``); every ``resync_interval`` seconds one reads everything.

One composition serves every mode: ``nova-pinning agent`` (the
foreground command, a systemd unit under ``etc/systemd/``, and the worker
process nova-compute starts when eventlet rules it), and nova-compute's
own pass thread in native-thread mode (``nova.passrunner``). What differs
is handed in: when the events are registered (at ``start``, or on the
pass thread once ``want_events`` said nova's event loop runs), what runs
before each pass (nova's overcommit file), and the timer (``resync``
every ``resync_interval``, or nova's ``periodic`` every
``periodic_interval``).

Invariants:

* the service is handed its configuration once, as a
  ``runtime.settings.RuntimeSettings`` (read at the edge by its ``read``:
  the agent command, nova-compute's activation), and hands each part
  down (the reconciler's, the metrics');
* an event callback only marks the model and queues a request; it never
  calls libvirt, never waits for a pass and never raises into libvirt's
  loop (``virt.Host``);
* passes never overlap (one coalescer thread, and the host-wide pass
  lock against every other process);
* ``request`` never blocks and never calls libvirt (safe on nova's
  threads and on libvirt's event thread);
* ``stop`` ends it cleanly: no new pass starts, a running one ends
  within its own time bound, the connection is closed;
* with ``requests`` (a text stream, the nova worker's stdin) each
  non-blank line read is a pass request, read ``REQUEST_LINE_LIMIT``
  characters at a time at most, and its end (nova-compute gone) stops
  the service;
* libvirt raises no event for a vCPU hot-plugged with ``setvcpus
  --live``: in every mode, every ``vcpu_poll_interval`` seconds (1) a
  poll is queued like a request; on the pass thread, a listing and one
  call a running guest (``virt.Host.vcpu_counts``: libvirt's live
  definition, never qemu's monitor) read every vCPU count, a guest whose
  count changed is marked in the model, and a pass runs only if one did
  or another request is pending (an unchanged host costs those calls
  and nothing else); polls and their calls are counted with the passes'
  (``nova_pinning_vcpu_polls_total``, ``nova_pinning_libvirt_calls_total``);
* ``before_pass`` (when given) runs on the pass thread before each pass
  that would run; a result it returns is the pass's result and no pass
  runs (nova's runtime: the overcommit file could not be written);
* ``basis`` is what the last pass that planned saw, summed up for nova's
  scheduler, and with ``summary_file`` written there
  (``observe.passsummary``: no libvirt call, any thread);
* with ``[nova_pinning] memory_home`` (on by default) each pass's
  result goes to the memory-home thread (``passes.memhome``: its own
  thread and libvirt connection, one arrived guest's memory moved home
  at a time; ``after_pass`` never blocks), its moves and their libvirt
  calls counted with the passes'; ``stop`` stops it;
* after each pass the pass is counted and, with ``[nova_pinning]
  metrics_textfile`` set, the Prometheus textfile rewritten
  (``passmetrics.PassMetrics``); a failure there is a logged warning. With
  an endpoint (``agent --listen``, ``[nova_pinning] metrics_listen``)
  the same counters are served over HTTP, with the host's series read
  at each scrape on a connection of the endpoint's own; ``stop``
  closes it.
"""

import collections
import dataclasses
import threading
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.host import model as model_mod
from nova_pinning_hooks.host import virt
from nova_pinning_hooks.observe import passmetrics
from nova_pinning_hooks.observe import passsummary
from nova_pinning_hooks.passes import coalescer as coalescer_mod
from nova_pinning_hooks.passes import hostport
from nova_pinning_hooks.passes import memhome
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.runtime import settings as runtime_settings

LOG = logging.getLogger(__name__)
REQUEST_LINE_LIMIT = 200  # characters of one request line
RECENT_REQUESTS = 1000  # (time, host, reason) kept for diagnostics


@dataclasses.dataclass(frozen=True)
class Role:
    """Where the service runs, and so how: the agent's by default.

    ``events``: follow libvirt's domain events; ``event_loop``: run
    libvirt's process-wide event loop ourselves (False where nova's
    driver runs it); ``defer_events``: register them on the pass thread
    once ``want_events`` is called (nova's loop runs only after its
    ``init_host``); ``interval``/``timer_reason``: the timed request
    (None: ``resync_interval``); ``start_reason``: the first pass's;
    ``name``: the pass thread's; ``summary_file``: where each pass's
    basis goes (``observe.passsummary``), None for none."""

    events: bool = True
    event_loop: bool = True
    defer_events: bool = False
    interval: typing.Optional[float] = None
    timer_reason: str = 'resync'
    start_reason: str = 'agent start'
    name: str = 'nova-pinning-agent-pass'
    summary_file: typing.Optional[str] = None


# Inside nova-compute: nova's driver runs libvirt's event loop, and only
# after its init_host; the timer is [nova_pinning] periodic_interval's.
NOVA_COMPUTE = Role(event_loop=False, defer_events=True,
                    timer_reason='periodic', start_reason='service start',
                    name='nova-pinning-pass')


class BindingService:
    """The passes of one host as a service (``Role``: the agent's or
    nova-compute's); ``before_pass`` runs before each pass (nova's
    allocation ratio: ``nova.ratiofile``)."""

    def __init__(self, config: runtime_settings.RuntimeSettings,
                 role: Role = Role(),
                 connect: typing.Optional[hostport.Connect] = None,
                 before_pass: typing.Optional[typing.Callable[
                     [], typing.Optional[reconciler.PassResult]]] = None
                 ) -> None:
        times = config.passes.times
        self.config = config
        self.model = model_mod.HostModel()
        self.reconciler = reconciler.Reconciler(config.passes,
                                                connect=connect,
                                                model=self.model)
        self.coalescer = coalescer_mod.Coalescer(
            self._run_pass, delay=times.coalesce_delay, name=role.name)
        self.events = role.events
        self.event_loop = role.event_loop
        self.defer_events = role.defer_events
        self.before_pass = before_pass
        self.interval = (times.resync_interval if role.interval is None
                         else role.interval)
        self.timer_reason = role.timer_reason
        self.start_reason = role.start_reason
        self.poll_interval = times.vcpu_poll_interval
        self.events_wanted = False
        self.watching = False
        # {uuid: count} of the last poll
        self._vcpu_counts: typing.Optional[dict[str, int]] = None
        self._poll_due = False
        self._other_requests = 0
        self._requests_lock = threading.Lock()
        self.stopped = threading.Event()
        self.last_result: typing.Optional[reconciler.PassResult] = None
        self.summary = passsummary.PassSummary(
            role.summary_file, times.summary_max_age, LOG)
        self.pass_metrics = passmetrics.PassMetrics(
            config.passes, config.observe, LOG)
        self.memory_home: typing.Optional[memhome.MemoryHome] = None
        if config.memory_home:
            passes, opener = config.passes, connect or virt.connect
            self.memory_home = memhome.MemoryHome(
                lambda: opener(passes.connection_uri, passes.host),
                self.pass_metrics.stats)
        # (monotonic time, host, reason) of recent requests: diagnostics.
        self.requests: collections.deque[
            tuple[float, typing.Optional[str], str]] = collections.deque(
                maxlen=RECENT_REQUESTS)

    def start(self) -> None:
        """Serve in the background: events (now, unless deferred), the
        first pass, the vCPU poll and the timer; returns at once. A
        libvirtd that is down now is retried by the passes (each opens
        the connection if needed) and by the timer."""
        if self.events and not self.defer_events:
            host = self.reconciler.host()
            try:
                if self.event_loop:
                    virt.start_event_loop()
                host.watch(self.model, self.request)
            except Exception as exc:
                LOG.error('libvirt events not registered (%s: %s); passes '
                          'run on requests and every %s s only',
                          type(exc).__name__, exc, self.interval)
        if self.memory_home is not None:
            self.memory_home.start()
        self.request(self.start_reason)
        for interval, loop, name in (
                (self.poll_interval, self._poll, 'vcpu-poll'),
                (self.interval, self._timer, 'timer')):
            if interval:
                threading.Thread(target=loop, daemon=True,
                                 name='nova-pinning-%s' % name).start()

    def want_events(self) -> None:
        """nova's event loop runs now: the next pass registers ours."""
        if self.events and self.defer_events:
            self.events_wanted = True

    def request(self, reason: str,
                host: typing.Optional[str] = None) -> bool:
        """Queue a pass; returns at once (safe on libvirt's thread)."""
        self.requests.append((time.monotonic(), host, reason))
        with self._requests_lock:
            self._other_requests += 1
        return self.coalescer.request(reason)

    def _timer(self) -> None:
        while not self.stopped.wait(self.interval):
            self.request(self.timer_reason)

    def _poll(self) -> None:
        while not self.stopped.wait(self.poll_interval):
            self._poll_due = True
            self.coalescer.request('vCPU count poll')

    def _watch(self) -> None:
        """On the pass thread: our events on a fresh connection, now that
        nova's driver registered and runs libvirt's event loop."""
        self.watching = True  # once, whatever happens
        try:
            self.reconciler.host().watch(self.model, self.request)
            LOG.info('nova-pinning-hooks: following libvirt domain events')
        except Exception as exc:
            LOG.warning('nova-pinning-hooks: libvirt events not followed '
                        '(%s: %s); requests and timed passes only',
                        type(exc).__name__, exc)

    def _vcpus_changed(self) -> bool:
        """On the pass thread: mark guests whose vCPU count changed."""
        host: typing.Optional[hostport.PassHost] = None
        before_calls: dict[str, int] = {}
        try:
            host = self.reconciler.host()
            before_calls = dict(host.calls)
            counts = host.vcpu_counts()
        except Exception as exc:  # the pass reports libvirt's state
            LOG.debug('vCPU count poll failed: %s', exc)
            return True
        finally:
            # Counted like a pass's calls: the polls are the agent's
            # cost on a quiet host (nova_pinning_libvirt_calls_total).
            self.pass_metrics.stats.record_poll(
                reconciler.calls_since(host, before_calls))
        before, self._vcpu_counts = self._vcpu_counts, counts
        changed = [u for u, n in counts.items()
                   if before is not None and before.get(u, n) != n]
        for uuid in changed:
            LOG.info('vCPU count of %s changed to %d (hot-plug)', uuid,
                     counts[uuid])
            self.model.mark(uuid)
        return bool(changed)

    def _run_pass(self) -> None:
        with self._requests_lock:
            others, self._other_requests = self._other_requests, 0
        if self._poll_due:
            self._poll_due = False
            if not self._vcpus_changed() and not others:
                return  # a poll that found nothing: no pass
        if self.before_pass is not None:
            refused = self.before_pass()
            if refused is not None:
                self.last_result = refused
                return
        if self.events_wanted and not self.watching:
            self._watch()
        result = self.reconciler.run_pass()
        self.last_result = result
        self.summary.after_pass(result, time.time())
        self.pass_metrics.after_pass(self.reconciler, result)
        if self.memory_home is not None:
            self.memory_home.after_pass(result)

    def basis(self) -> typing.Optional[summary_mod.Basis]:
        """``PassSummary.basis``: for nova's scheduler; any thread."""
        return self.summary.basis()

    def run(self, stop: typing.Optional[threading.Event] = None,
            requests: typing.Optional[typing.TextIO] = None) -> None:
        """Start, then serve until ``stop`` is set (or ``requests``
        ends)."""
        stop = stop or self.stopped
        if requests is not None:
            threading.Thread(target=self._read_requests,
                             args=(requests, stop), daemon=True,
                             name='nova-pinning-agent-requests').start()
        self.start()
        try:
            # Bounded waits: the main thread stays able to take signals.
            while not stop.wait(1.0):
                pass
        finally:
            self.stop()

    def _read_requests(self, stream: typing.TextIO,
                       stop: threading.Event) -> None:
        try:
            while True:
                # Bounded: a line longer than this is read as several
                # requests, never held whole in memory.
                line = stream.readline(REQUEST_LINE_LIMIT)
                if not line:
                    break
                if line.strip():  # blank: the end of a cut line
                    self.request(line.strip())
        except Exception as exc:  # a broken pipe is an end too
            LOG.warning('request stream failed: %s', exc)
        LOG.info('request stream ended (nova-compute gone): stopping')
        stop.set()

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped.set()
        self.coalescer.stop(timeout)
        if self.memory_home is not None:
            self.memory_home.stop(timeout)
        self.pass_metrics.close()
        self.reconciler.close()
