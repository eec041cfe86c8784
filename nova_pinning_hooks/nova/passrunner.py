"""The passes inside nova-compute: on a thread of its own, or a worker.

A ``PassRunner`` runs the passes nova-compute's hooks ask for, in one of
two ways chosen once, at activation (``make``), each a class of its own
behind that one ``typing.Protocol``:

* ``ThreadPasses``, native threads (nova 32 and later, nova 34's
  default): the same ``runtime.service.BindingService`` that
  ``nova-pinning agent`` runs, on a daemon thread of this process: its
  model, coalescer, vCPU count polls and metrics; nova's overcommit file
  written before each pass (``ratiofile.RatioFile``); the timer is
  nova's ``periodic_interval``. libvirt's event loop is process-wide and
  nova's driver registers and runs it (in ``init_host``); once
  ``init_host`` has returned, the pass thread reopens its connection
  with our domain events on it, and nova's event thread delivers them:
  each callback marks the model and queues a request, nothing more, so
  nova's loop is never held. Before that, and if nova's loop is absent,
  the hooks, the polls and the periodic pass drive the passes.
* ``WorkerPasses``, eventlet (older nova, or ``concurrency_backend =
  eventlet``): a libvirt call would freeze every green thread, so passes
  run in one long-lived worker process, ``nova-pinning agent
  --requests-on-stdin`` with nova's own configuration files (the same
  ``BindingService`` there: its own connection, model, events and
  polls); each request is one line written to its standard input without
  blocking, and a worker that died is started again at the next request.

Invariants:

* a runner is handed its configuration as records, read once at
  activation (``runtime.settings.RuntimeSettings``, ``ratiofile.NovaOptions``);
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
import dataclasses
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
from nova_pinning_hooks.runtime import settings as runtime_settings
from nova_pinning_hooks.runtime import service as service_mod

LOG = logging.getLogger(__name__)

# (monotonic time, host, reason) of recent requests, as the service's
Requests = collections.deque[tuple[float, typing.Optional[str], str]]
# The last pass's result; out of process, whether the request reached
# the worker.
LastResult = typing.Union[reconciler.PassResult, bool, None]


def eventlet_patched() -> bool:
    """True when eventlet has monkey-patched threads in this process."""
    patcher = sys.modules.get('eventlet.patcher')
    try:
        return bool(patcher and patcher.is_monkey_patched('thread'))
    except Exception:
        return False


class PassRunner(typing.Protocol):
    """What activation, the hooks, nova's scheduler report and the tests
    ask of the passes in nova-compute, in either mode."""

    out_of_process: bool
    ratio_file: ratiofile.RatioFile
    coalescer: coalescer_mod.Coalescer
    requests: Requests

    @property
    def last_result(self) -> LastResult:
        """The last pass's result (out of process: whether the last
        request reached the worker); None before any."""

    @property
    def watching(self) -> bool:
        """libvirt's domain events reach the passes."""

    @property
    def pass_metrics(self) -> typing.Optional[passmetrics.PassMetrics]:
        """This process's pass counters (None: the worker's own)."""

    def basis(self) -> typing.Optional[summary_mod.Basis]:
        """What the last pass that planned saw (``summary.Basis``), or
        None before any did."""

    def request(self, reason: str, host: typing.Optional[str] = None
                ) -> bool:
        """Queue a pass (never blocks: see ``Coalescer.request``)."""

    def note_allocation_ratio(self, ratio: float,
                              node: typing.Optional[str] = None) -> bool:
        """nova reported this VCPU allocation ratio for ``node`` (on
        nova's thread: only remembered; the pass thread writes it)."""

    def start(self) -> None:
        """The overcommit file, then the passes (first pass, polls,
        periodic pass); returns at once."""

    def stop(self) -> None:
        """No new pass; the running one ends within its bound."""


def make(config: runtime_settings.RuntimeSettings,
         nova: ratiofile.NovaOptions,
         out_of_process: typing.Optional[bool] = None) -> PassRunner:
    """The runner of this process: out of process when eventlet rules it
    (``out_of_process`` None: ``eventlet_patched``), else on a thread."""
    if eventlet_patched() if out_of_process is None else out_of_process:
        return WorkerPasses(config, nova)
    return ThreadPasses(config, nova)


def _note(runner: PassRunner, ratio: float,
          node: typing.Optional[str]) -> bool:
    """``note_allocation_ratio`` of either runner: the ratio file
    remembers it, and a pass is asked for when it is new."""
    if not runner.ratio_file.note(ratio, node):
        return False
    return runner.request('allocation ratio now %s' % ratio)


class ThreadPasses:
    """Native threads: the binding service on a daemon thread of
    nova-compute, the overcommit file written before each pass."""

    out_of_process = False

    def __init__(self, config: runtime_settings.RuntimeSettings,
                 nova: ratiofile.NovaOptions) -> None:
        self.config = config
        self.ratio_file = ratiofile.RatioFile(
            nova, config.passes.ratio.overcommit_file)
        self.service = service_mod.BindingService(
            config, dataclasses.replace(
                service_mod.NOVA_COMPUTE,
                interval=config.passes.times.periodic_interval),
            before_pass=self.ratio_file.before_pass)
        self.coalescer = self.service.coalescer
        self.requests: Requests = self.service.requests

    @property
    def last_result(self) -> LastResult:
        return self.service.last_result

    @property
    def watching(self) -> bool:
        return self.service.watching

    @property
    def pass_metrics(self) -> typing.Optional[passmetrics.PassMetrics]:
        return self.service.pass_metrics

    def basis(self) -> typing.Optional[summary_mod.Basis]:
        return self.service.basis()

    def request(self, reason: str, host: typing.Optional[str] = None
                ) -> bool:
        if reason == 'init_host':
            self.service.want_events()  # nova's event loop runs now
        return self.service.request(reason, host)

    def note_allocation_ratio(self, ratio: float,
                              node: typing.Optional[str] = None) -> bool:
        return _note(self, ratio, node)

    def start(self) -> None:
        self.ratio_file.write()
        self.start_endpoint()
        self.service.start()

    def start_endpoint(self) -> bool:
        """With ``[nova_pinning] metrics_listen`` set, serve the metrics
        with this thread's pass counters; a failure (bad value, port
        taken) is a logged error, nova-compute runs on."""
        try:
            listen = self.config.observe.metrics_listen
            if not listen:
                return False
            self.service.pass_metrics.start_endpoint(
                httpserve.parse_listen(listen))
        except Exception as exc:
            LOG.error('nova-pinning-hooks: metrics not served: %s: %s',
                      type(exc).__name__, exc)
            return False
        return True

    def stop(self) -> None:
        self.service.stop()


class WorkerPasses:
    """Out of process: each request is a line to one long-lived
    ``nova-pinning agent --requests-on-stdin`` worker, started again at
    the next request once it died; the overcommit file is written here,
    before each request."""

    out_of_process = True

    def __init__(self, config: runtime_settings.RuntimeSettings,
                 nova: ratiofile.NovaOptions) -> None:
        self.config = config
        self.ratio_file = ratiofile.RatioFile(
            nova, config.passes.ratio.overcommit_file)
        self.worker: typing.Optional[subprocess.Popen[bytes]] = None
        self.worker_starts = 0
        # whether the last request reached the worker
        # (``_pass_in_child``), or the ratio file's refusal
        self._last_result: LastResult = None
        # (file identity, Basis) of the worker's summary file
        self._file_basis: typing.Optional[tuple[tuple[int, int, int],
                                                summary_mod.Basis]] = None
        self.coalescer = coalescer_mod.Coalescer(
            self._run_in_worker, delay=config.passes.times.coalesce_delay)
        self.requests: Requests = collections.deque(
            maxlen=service_mod.RECENT_REQUESTS)
        self._stop = threading.Event()

    @property
    def last_result(self) -> LastResult:
        return self._last_result

    @property
    def watching(self) -> bool:
        return False  # the worker's events are its own

    @property
    def pass_metrics(self) -> typing.Optional[passmetrics.PassMetrics]:
        return None  # the worker serves its own

    def basis(self) -> typing.Optional[summary_mod.Basis]:
        """Read from the worker's summary file (errors raised: the
        reporter logs them)."""
        path = self.config.summary_file
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
        self.requests.append((time.monotonic(), host, reason))
        return self.coalescer.request(reason)

    def note_allocation_ratio(self, ratio: float,
                              node: typing.Optional[str] = None) -> bool:
        return _note(self, ratio, node)

    def start(self) -> None:
        self.ratio_file.write()
        # The worker serves the metrics and polls.
        self.coalescer.request('service start')
        interval = self.config.passes.times.periodic_interval
        if interval:
            threading.Thread(target=self._periodic, args=(interval,),
                             name='nova-pinning-periodic',
                             daemon=True).start()

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
        for path in self.config.config_files:
            argv += ['--config-file', path]
        for path in self.config.config_dirs:
            argv += ['--config-dir', path]
        # nova's connection (activation.follow_nova_connection) is in no
        # file the worker reads.
        argv.append('agent')
        if self.config.report_summary:
            argv += ['--summary-file', self.config.summary_file]
        return argv + ['--connection', self.config.passes.connection_uri,
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
