"""The passes inside nova-compute: on a thread of its own, or a worker.

``Runtime`` runs the passes nova-compute's hooks ask for, in one of two
ways chosen once, at activation:

* native threads (nova 32 and later, nova 34's default): the same
  ``runtime.service.BindingService`` that ``nova-pinning agent`` runs,
  on a daemon thread of this process: its model, coalescer, vCPU count
  polls and metrics; nova's overcommit file written before each pass
  (``ratiofile.RatioFile``); the timer is nova's ``periodic_interval``.
  libvirt's event loop is process-wide and nova's driver registers and
  runs it (in ``init_host``); once ``init_host`` has returned, the pass
  thread reopens its connection with our domain events on it, and
  nova's event thread delivers them: each callback marks the model and
  queues a request, nothing more, so nova's loop is never held. Before
  that, and if nova's loop is absent, the hooks, the polls and the
  periodic pass drive the passes.
* eventlet (older nova, or ``concurrency_backend = eventlet``): a libvirt
  call would freeze every green thread, so passes run in one long-lived
  worker process, ``nova-pinning agent --requests-on-stdin`` with nova's
  own configuration files (the same ``BindingService`` there: its own
  connection, model, events and polls); each request is one line
  written to its standard input without blocking, and a worker that
  died is started again at the next request.

Invariants:

* nothing here blocks a caller: requests go to a ``Coalescer`` whose
  thread runs the passes (or writes the worker's line);
* eventlet is never imported here: its state is read from ``sys.modules``
  only when nova already loaded it;
* every failure is logged; none reaches nova;
* ``basis`` (what the last pass that planned saw, for nova's scheduler:
  ``nova.nodesummary``) is the pass thread's, in memory, or under
  eventlet the worker's ``[nova_pinning] summary_file`` (``agent
  --summary-file``), read as a small regular file and parsed again only
  when it changed; neither calls libvirt.
"""

import collections
import errno
import fcntl
import os
import subprocess
import sys
import threading
import time
import typing

from oslo_log import log as logging

from nova_pinning_hooks.engine import summary as summary_mod
from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.nova import ratiofile
from nova_pinning_hooks.observe import httpserve
from nova_pinning_hooks.observe import passmetrics
from nova_pinning_hooks.passes import coalescer as coalescer_mod
from nova_pinning_hooks.passes import reconciler
from nova_pinning_hooks.runtime import service as service_mod

LOG = logging.getLogger(__name__)


def eventlet_patched() -> bool:
    """True when eventlet has monkey-patched threads in this process."""
    patcher = sys.modules.get('eventlet.patcher')
    try:
        return bool(patcher and patcher.is_monkey_patched('thread'))
    except Exception:
        return False


class Runtime:

    def __init__(self, conf: typing.Any,
                 out_of_process: typing.Optional[bool] = None) -> None:
        self.conf = conf
        group = conf.nova_pinning
        self.out_of_process = (eventlet_patched() if out_of_process is None
                               else out_of_process)
        self.ratio_file = ratiofile.RatioFile(conf)
        self.service: typing.Optional[service_mod.BindingService] = None
        # the agent process, when out of process
        self.worker: typing.Optional[subprocess.Popen[bytes]] = None
        self.worker_starts = 0
        # The last pass's result; out of process, whether the request
        # reached the worker (``_pass_in_child``).
        self._last_result: typing.Union[
            reconciler.PassResult, bool, None] = None
        # (file identity, Basis) of the worker's summary file
        self._file_basis: typing.Optional[tuple[tuple[int, int, int],
                                                summary_mod.Basis]] = None
        if self.out_of_process:
            self.coalescer = coalescer_mod.Coalescer(
                self._run_in_worker, delay=group.coalesce_delay)
            # (monotonic time, host, reason), as the service's
            self.requests: collections.deque[
                tuple[float, typing.Optional[str], str]] = collections.deque(
                    maxlen=service_mod.RECENT_REQUESTS)
            self._stop = threading.Event()
        else:
            self.service = service_mod.BindingService(
                conf, event_loop=False, defer_events=True,
                before_pass=self.ratio_file.before_pass,
                interval=group.periodic_interval, timer_reason='periodic',
                start_reason='service start', name='nova-pinning-pass')
            self.coalescer = self.service.coalescer
            self.requests = self.service.requests

    # What tests and diagnostics read, in either mode.
    @property
    def last_result(self) -> typing.Union[reconciler.PassResult, bool,
                                          None]:
        return (self._last_result if self.service is None
                else self.service.last_result)

    @property
    def watching(self) -> bool:
        return self.service is not None and self.service.watching

    @property
    def pass_metrics(self) -> typing.Optional[passmetrics.PassMetrics]:
        return None if self.service is None else self.service.pass_metrics

    def basis(self) -> typing.Optional[summary_mod.Basis]:
        """What the last pass that planned saw (``summary.Basis``), or
        None before any did; under eventlet read from the worker's
        file (errors raised: the reporter logs them)."""
        if self.service is not None:
            return self.service.basis()
        path = self.conf.nova_pinning.summary_file
        try:
            st = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        cached = self._file_basis
        if cached is not None and cached[0] == key:
            return cached[1]
        b = summary_mod.basis_from_json(statefile.read_json(
            path, safefs.STATE_LIMIT, 'summary file'))
        self._file_basis = (key, b)
        return b

    def request(self, reason: str, host: typing.Optional[str] = None
                ) -> bool:
        """Queue a pass (never blocks: see ``Coalescer.request``)."""
        if self.service is not None:
            if reason == 'init_host':
                self.service.want_events()  # nova's event loop runs now
            return self.service.request(reason, host)
        self.requests.append((time.monotonic(), host, reason))
        return self.coalescer.request(reason)

    def note_allocation_ratio(self, ratio: float,
                              node: typing.Optional[str] = None) -> bool:
        """nova reported this VCPU allocation ratio for ``node`` (on
        nova's thread: only remembered; the pass thread writes it)."""
        if not self.ratio_file.note(ratio, node):
            return False
        return self.request('allocation ratio now %s' % ratio)

    def start(self) -> None:
        self.ratio_file.write()
        if self.service is not None:
            self.start_endpoint()
            self.service.start()
            return
        # Out of process: the worker serves the metrics and polls.
        self.coalescer.request('service start')
        interval = self.conf.nova_pinning.periodic_interval
        if interval:
            threading.Thread(target=self._periodic, args=(interval,),
                             name='nova-pinning-periodic',
                             daemon=True).start()

    def start_endpoint(self) -> bool:
        """With ``[nova_pinning] metrics_listen`` set, serve the metrics
        with this thread's pass counters; a failure (bad value, port
        taken) is a logged error, nova-compute runs on."""
        try:
            listen = self.conf.nova_pinning.metrics_listen
            if not listen:
                return False
            assert self.service is not None  # in process (``start``)
            self.service.pass_metrics.start_endpoint(
                httpserve.parse_listen(listen))
        except Exception as exc:
            LOG.error('nova-pinning-hooks: metrics not served: %s: %s',
                      type(exc).__name__, exc)
            return False
        return True

    def _periodic(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.coalescer.request('periodic')

    def _run_in_worker(self) -> None:
        refused = self.ratio_file.before_pass()
        if refused is not None:
            self._last_result = refused
            return
        self._last_result = self._pass_in_child()

    def child_argv(self) -> list[str]:
        argv = [sys.executable, '-m', 'nova_pinning_hooks.cmd.pinning']
        for path in self.conf.config_file or ():
            argv += ['--config-file', path]
        for path in getattr(self.conf, 'config_dir', None) or ():
            argv += ['--config-dir', path]
        # nova's connection (activation.follow_nova_connection) is in no
        # file the worker reads.
        argv.append('agent')
        if self.conf.nova_pinning.report_summary:
            argv += ['--summary-file', self.conf.nova_pinning.summary_file]
        return argv + ['--connection', self.conf.nova_pinning.connection_uri,
                       '--requests-on-stdin']

    def _pass_in_child(self) -> bool:
        """Hand the request to the worker process (started, or started
        again, here); True once written."""
        worker = self.worker
        if worker is None or worker.poll() is not None:
            if worker is not None:
                LOG.error('nova-pinning-hooks: pass worker exited %s; '
                          'starting it again', worker.returncode)
                assert worker.stdin is not None  # stdin=subprocess.PIPE
                worker.stdin.close()  # the dead one's pipe
            try:
                # Its stdout and stderr are nova-compute's: where nova's
                # logging configuration sends nova's own lines, it sends
                # its own (it prints nothing else).
                worker = self.worker = subprocess.Popen(
                    self.child_argv(), stdin=subprocess.PIPE,
                    close_fds=True)
            except OSError as exc:
                LOG.error('nova-pinning-hooks: pass worker not started: '
                          '%s', exc)
                self.worker = None
                return False
            self.worker_starts += 1
            assert worker.stdin is not None  # stdin=subprocess.PIPE
            fd = worker.stdin.fileno()
            fcntl.fcntl(fd, fcntl.F_SETFL,
                        fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        assert worker.stdin is not None  # stdin=subprocess.PIPE
        try:
            os.write(worker.stdin.fileno(), b'pass\n')
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                return True  # the pipe is full: passes are pending
            LOG.error('nova-pinning-hooks: pass worker unreachable: %s',
                      exc)
            return False
        return True

    def stop(self) -> None:
        if self.service is not None:
            self.service.stop()
            return
        self._stop.set()
        self.coalescer.stop()
        worker, self.worker = self.worker, None
        if worker is not None:
            assert worker.stdin is not None  # stdin=subprocess.PIPE
            worker.stdin.close()  # its end of input: it stops
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                worker.kill()
