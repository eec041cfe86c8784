"""The long-lived binding agent: model, events, coalescer, resync.

``BindingService`` keeps one libvirt connection and one
``model.HostModel`` for as long as it runs. libvirt's domain events (and
the connection's close) mark the model and request a pass through a
``coalescer.Coalescer``, so a change nobody told us about (a guest
started with virsh, a pin changed by hand, libvirtd restarted) is
corrected within about ``coalesce_delay`` plus one pass, not at the next
periodic pass. Each pass reads only what the model cannot vouch for
(``reconciler``); every ``resync_interval`` seconds one reads everything.

It runs as ``nova-pinning agent`` (the foreground command, a systemd
unit under ``etc/systemd/``, and the worker process nova-compute starts
when eventlet rules it: ``nova.agent``), one implementation for all.

Invariants:

* an event callback only marks the model and queues a request; it never
  calls libvirt, never waits for a pass and never raises into libvirt's
  loop (``virt.Host``);
* passes never overlap (one coalescer thread, and the host-wide pass
  lock against every other process);
* ``stop`` ends it cleanly: no new pass starts, a running one ends
  within its own time bound, the connection is closed;
* with ``requests`` (a text stream, the nova worker's stdin) each
  non-blank line read is a pass request, read ``REQUEST_LINE_LIMIT``
  characters at a time at most, and its end (nova-compute gone) stops
  the service;
* libvirt raises no event for a vCPU hot-plugged with ``setvcpus
  --live``: every ``vcpu_poll_interval`` seconds (1) a poll is queued
  like a request; on the pass thread, a listing and one call a running
  guest (``virt.Host.vcpu_counts``: libvirt's live definition, never
  qemu's monitor) read every vCPU count, a guest whose count changed is
  marked in the model, and a pass runs only if one did or another
  request is pending (an unchanged host costs those calls and nothing
  else); polls and their calls are counted with the passes'
  (``nova_pinning_vcpu_polls_total``, ``nova_pinning_libvirt_calls_total``);
* after each pass the pass is counted and, with ``[nova_pinning]
  metrics_textfile`` set, the Prometheus textfile rewritten
  (``passmetrics.PassMetrics``); a failure there is a logged warning. With
  an endpoint (``agent --listen``, ``[nova_pinning] metrics_listen``)
  the same counters are served over HTTP, with the host's series read
  at each scrape on a connection of the endpoint's own; ``stop``
  closes it.
"""

import threading

from oslo_log import log as logging

from nova_pinning_hooks.host import model as model_mod
from nova_pinning_hooks.observe import passmetrics
from nova_pinning_hooks.passes import coalescer as coalescer_mod
from nova_pinning_hooks.passes import reconciler

LOG = logging.getLogger(__name__)
REQUEST_LINE_LIMIT = 200  # characters of one request line


class BindingService:

    def __init__(self, conf, connect=None, events=True, event_loop=True):
        group = conf.nova_pinning
        self.conf = conf
        self.model = model_mod.HostModel()
        self.reconciler = reconciler.Reconciler(conf, connect=connect,
                                                model=self.model)
        self.coalescer = coalescer_mod.Coalescer(
            self._run_pass, delay=group.coalesce_delay,
            name='nova-pinning-agent-pass')
        self.events = events
        self.event_loop = event_loop
        self.interval = group.resync_interval
        self.poll_interval = group.vcpu_poll_interval
        self._vcpu_counts = None  # {uuid: count} of the last poll
        self._poll_due = False
        self._other_requests = 0
        self._requests_lock = threading.Lock()
        self.stopped = threading.Event()
        self.last_result = None
        self.pass_metrics = passmetrics.PassMetrics(conf, LOG)

    def start(self):
        """Register for events (opening the connection), then queue the
        first pass. A libvirtd that is down now is retried by the passes
        (each opens the connection if needed) and by the resync."""
        if self.events:
            host = self.reconciler.host()
            try:
                if self.event_loop:
                    from nova_pinning_hooks.host import virt
                    virt.start_event_loop()
                host.watch(self.model, self.request)
            except Exception as exc:
                LOG.error('libvirt events not registered (%s: %s); passes '
                          'run on requests and every %s s only',
                          type(exc).__name__, exc, self.interval)
        self.request('agent start')

    def request(self, reason):
        """Queue a pass; returns at once (safe on libvirt's thread)."""
        with self._requests_lock:
            self._other_requests += 1
        return self.coalescer.request(reason)

    def _poll(self, stop):
        while not stop.wait(self.poll_interval):
            self._poll_due = True
            self.coalescer.request('vCPU count poll')

    def _vcpus_changed(self):
        """On the pass thread: mark guests whose vCPU count changed."""
        host, before_calls = None, {}
        try:
            host = self.reconciler.host()
            before_calls = dict(getattr(host, 'calls', {}))
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

    def _run_pass(self):
        with self._requests_lock:
            others, self._other_requests = self._other_requests, 0
        if self._poll_due:
            self._poll_due = False
            if not self._vcpus_changed() and not others:
                return  # a poll that found nothing: no pass
        result = self.reconciler.run_pass()
        self.last_result = result
        self.pass_metrics.after_pass(self.reconciler, result)

    def run(self, stop=None, requests=None):
        """Start, then serve until ``stop`` is set (or ``requests``
        ends); a resync request every ``resync_interval`` seconds."""
        stop = stop or self.stopped
        if requests is not None:
            threading.Thread(target=self._read_requests,
                             args=(requests, stop), daemon=True,
                             name='nova-pinning-agent-requests').start()
        self.start()
        if self.poll_interval:
            threading.Thread(target=self._poll, args=(stop,), daemon=True,
                             name='nova-pinning-agent-vcpu-poll').start()
        try:
            while not stop.wait(self.interval or None):
                self.request('resync')
        finally:
            self.stop()

    def _read_requests(self, stream, stop):
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

    def stop(self, timeout=10.0):
        self.stopped.set()
        self.coalescer.stop(timeout)
        self.pass_metrics.close()
        self.reconciler.close()
