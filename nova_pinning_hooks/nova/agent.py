"""The runtime of nova-pinning-hooks inside nova-compute.

``activate(conf)`` (called once by the notifier switch) writes the
overcommit file from nova's configuration, installs the hook points
(and, on the libvirt driver, the allocation-ratio hook and the live
migration XML filter, ``nova.migration``), queues a first pass and starts
the periodic safety net. Hooks call ``request_pass``, which only queues.

The allocation ratio that passes use is the one nova last put into the
node's VCPU inventory (``update_provider_tree``): placement's, unless
``cpu_allocation_ratio`` overrides it. It is rewritten into the
overcommit file by the pass worker, before the pass, whenever it
changes, with its source (``placement``, or the option that set it).

Invariants:

* nothing here blocks a caller: requests go to a ``Coalescer`` whose
  worker runs the passes;
* in native-thread nova the worker is a daemon thread running the pass in
  this process; when eventlet has monkey-patched ``threading`` (older
  nova, or ``concurrency_backend = eventlet``) a libvirt call would freeze
  every green thread, so each pass runs in a child process
  (``nova-pinning rebind`` with nova's own configuration files);
* eventlet is never imported here: its state is read from ``sys.modules``
  only when nova already loaded it;
* after each pass, with ``[nova_pinning] metrics_textfile`` set, the
  Prometheus textfile is rewritten (``metrics.after_pass``) by whoever
  ran the pass: the worker thread, or the child process, which carries
  the pass counters on from the file it replaces. No port is opened;
  a metrics failure is a logged warning, never a failed pass;
* every failure is logged; none reaches nova.
"""

import collections
import os
import subprocess
import sys
import threading
import time

from oslo_log import log as logging

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks import overcommit
from nova_pinning_hooks import reconciler
from nova_pinning_hooks import safefs

LOG = logging.getLogger(__name__)
PASS_TIMEOUT = 300
RATIO_HOOK = 'nova_pinning_allocation_ratio'

_AGENT = None
_ACTIVATION_LOCK = threading.Lock()


def eventlet_patched():
    """True when eventlet has monkey-patched threads in this process."""
    patcher = sys.modules.get('eventlet.patcher')
    try:
        return bool(patcher and patcher.is_monkey_patched('thread'))
    except Exception:
        return False


class Agent:

    def __init__(self, conf, out_of_process=None):
        self.conf = conf
        group = conf.nova_pinning
        self.out_of_process = (eventlet_patched() if out_of_process is None
                               else out_of_process)
        self.reconciler = (None if self.out_of_process
                           else reconciler.Reconciler(conf))
        self.coalescer = reconciler.Coalescer(
            self._run_pass, delay=group.coalesce_delay)
        self.interval = group.periodic_interval
        self.metrics_textfile = group.metrics_textfile
        self._stop = threading.Event()
        self._timer = None
        self.last_result = None
        self.pass_stats = None  # metrics.PassStats, made by the first pass
        self.ratio = None  # the ratio last written to the overcommit file
        self._pending_ratio = None
        # The node whose inventory sets the ratio: a libvirt nova-compute
        # has one; the first to report is it (several only in tests that
        # run many computes in one process).
        self.node = None
        # (monotonic time, host, reason) of recent requests: diagnostics.
        self.requests = collections.deque(maxlen=1000)

    def request(self, reason, host=None):
        """Queue a pass (never blocks: see ``Coalescer.request``)."""
        self.requests.append((time.monotonic(), host, reason))
        return self.coalescer.request(reason)

    def note_allocation_ratio(self, ratio, node=None):
        """nova reported this VCPU allocation ratio for ``node`` (on
        nova's thread: only remembered here; the worker writes the
        file)."""
        if self.node is None:
            self.node = node
        elif node != self.node:
            LOG.debug('nova-pinning-hooks: ratio of node %s ignored (this '
                      'agent follows node %s)', node, self.node)
            return False
        if ratio == self.ratio or ratio == self._pending_ratio:
            return False
        self._pending_ratio = ratio
        return self.request('allocation ratio now %s' % ratio)

    def start(self):
        self.write_overcommit()
        self.coalescer.request('service start')
        if self.interval:
            self._timer = threading.Thread(
                target=self._periodic, name='nova-pinning-periodic',
                daemon=True)
            self._timer.start()

    def write_overcommit(self, ratio=None):
        path = self.conf.nova_pinning.overcommit_file
        try:
            content = overcommit.from_nova_conf(self.conf, ratio)
            # Only this service writes the file: what a crash left of an
            # earlier write is garbage.
            safefs.remove_stale_temporaries(path)
            overcommit.write(path, content)
        except Exception as exc:
            LOG.error('nova-pinning-hooks: cannot write the overcommit file '
                      '%s: %s; passes will not run until it exists',
                      path, exc)
            return False
        self.ratio = content['allocation_ratio']
        LOG.info('nova-pinning-hooks: wrote %s: allocation ratio %s (%s)',
                 path, content['allocation_ratio'], content['ratio_source'])
        return True

    def _periodic(self):
        while not self._stop.wait(self.interval):
            self.coalescer.request('periodic')

    def _run_pass(self):
        ratio, self._pending_ratio = self._pending_ratio, None
        if ratio is not None and ratio != self.ratio:
            self.write_overcommit(ratio)
        if self.out_of_process:
            self.last_result = self._pass_in_child()
        else:
            self.last_result = self.reconciler.run_pass()
            self._metrics(self.last_result)

    def _metrics(self, result):
        try:
            from nova_pinning_hooks import metrics
            if self.pass_stats is None:
                self.pass_stats = metrics.PassStats()
            metrics.after_pass(self.reconciler, self.conf, result,
                               self.pass_stats, LOG)
        except Exception as exc:  # never the pass's or nova's problem
            LOG.warning('nova-pinning-hooks: metrics not written: %s', exc)

    def child_argv(self):
        argv = [sys.executable, '-m', 'nova_pinning_hooks.cmd.pinning']
        for path in self.conf.config_file or ():
            argv += ['--config-file', path]
        for path in getattr(self.conf, 'config_dir', None) or ():
            argv += ['--config-dir', path]
        argv.append('rebind')
        if self.metrics_textfile:
            argv.append('--write-metrics')
        return argv

    def _pass_in_child(self):
        try:
            proc = subprocess.run(
                self.child_argv(), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                timeout=PASS_TIMEOUT, check=False, close_fds=True)
        except (OSError, subprocess.SubprocessError) as exc:
            LOG.error('nova-pinning-hooks: pass process failed: %s', exc)
            return exc
        if proc.returncode:
            tail = proc.stderr.decode('utf-8', 'replace').strip()
            LOG.error('nova-pinning-hooks: pass process exited %d: %s',
                      proc.returncode, tail.splitlines()[-1] if tail else '')
        return proc.returncode

    def stop(self):
        self._stop.set()
        self.coalescer.stop()
        if self.reconciler is not None:
            self.reconciler.close()


def in_nova_compute():
    """True in the nova-compute service (not api, conductor, ...)."""
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ''
    return 'nova.cmd.compute' in sys.modules or argv0 == 'nova-compute'


def _install_driver_hooks(driver_cls=None):
    """The allocation-ratio hook and the live migration XML filter, on
    nova's libvirt driver. Logged, never raised, if this nova lacks it."""
    from nova_pinning_hooks.nova import hookpoints
    from nova_pinning_hooks.nova import migration
    try:
        if driver_cls is None:
            from nova.virt.libvirt import driver as libvirt_driver
            driver_cls = libvirt_driver.LibvirtDriver
        hookpoints.install(driver_cls, ['update_provider_tree'], RATIO_HOOK)
        migration.install()
    except Exception:
        LOG.exception('nova-pinning-hooks: libvirt driver hooks not '
                      'installed: the ratio stays the configured one and '
                      'live migrations carry our pins')


def activate(conf, manager_cls=None, driver_cls=None):
    """Switch nova-pinning-hooks on in this nova-compute; idempotent.

    Returns the Agent, or None when switched off or not in nova-compute.
    """
    global _AGENT
    with _ACTIVATION_LOCK:
        if _AGENT is not None:
            return _AGENT
        conf_mod.register_opts(conf)
        if not conf.nova_pinning.enabled:
            LOG.info('nova-pinning-hooks: disabled ([nova_pinning] '
                     'enabled = false)')
            return None
        from nova_pinning_hooks.nova import hookpoints
        if manager_cls is None:
            from nova.compute import manager as compute_manager
            manager_cls = compute_manager.ComputeManager
        hookpoints.install(manager_cls, conf.nova_pinning.hooked_methods,
                           conf.nova_pinning.hook_name)
        _install_driver_hooks(driver_cls)
        # Load the hooks now, not on nova's thread at its first operation.
        from nova_pinning_hooks.nova import hooks
        hooks.manager(conf.nova_pinning.hook_name)
        hooks.manager(RATIO_HOOK)
        _AGENT = Agent(conf)
        _AGENT.start()
        LOG.info('nova-pinning-hooks: active (%s passes)',
                 'out-of-process' if _AGENT.out_of_process else 'threaded')
        return _AGENT


def request_pass(reason, host=None):
    """Queue a pass; returns at once. Without an agent, does nothing."""
    agent = _AGENT
    if agent is None:
        return False
    return agent.request(reason, host)


def note_allocation_ratio(ratio, node=None):
    """The VCPU allocation ratio nova just reported (see ``Agent``)."""
    agent = _AGENT
    if agent is None:
        return False
    return agent.note_allocation_ratio(ratio, node)


def current():
    return _AGENT


def deactivate():
    """Stop the agent (tests; nova-compute simply exits)."""
    global _AGENT
    with _ACTIVATION_LOCK:
        agent, _AGENT = _AGENT, None
    if agent is not None:
        agent.stop()
