"""The runtime of nova-pinning-hooks inside nova-compute.

``activate(conf)`` (called once by the notifier switch) writes the
overcommit file from nova's configuration, installs the hook points,
queues a first pass and starts the periodic safety net. Hooks call
``request_pass``, which only queues.

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
* every failure is logged; none reaches nova.
"""

import os
import subprocess
import sys
import threading

from oslo_log import log as logging

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks import overcommit
from nova_pinning_hooks import reconciler
from nova_pinning_hooks import safefs

LOG = logging.getLogger(__name__)
PASS_TIMEOUT = 300

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
        self._stop = threading.Event()
        self._timer = None
        self.last_result = None

    def start(self):
        self.write_overcommit()
        self.coalescer.request('service start')
        if self.interval:
            self._timer = threading.Thread(
                target=self._periodic, name='nova-pinning-periodic',
                daemon=True)
            self._timer.start()

    def write_overcommit(self):
        path = self.conf.nova_pinning.overcommit_file
        try:
            content = overcommit.from_nova_conf(self.conf)
            # Only this service writes the file: what a crash left of an
            # earlier write is garbage.
            safefs.remove_stale_temporaries(path)
            overcommit.write(path, content)
        except Exception as exc:
            LOG.error('nova-pinning-hooks: cannot write the overcommit file '
                      '%s: %s; passes will not run until it exists',
                      path, exc)
            return False
        LOG.info('nova-pinning-hooks: wrote %s: allocation ratio %s (%s)',
                 path, content['allocation_ratio'], content['ratio_source'])
        return True

    def _periodic(self):
        while not self._stop.wait(self.interval):
            self.coalescer.request('periodic')

    def _run_pass(self):
        if self.out_of_process:
            self.last_result = self._pass_in_child()
        else:
            self.last_result = self.reconciler.run_pass()

    def child_argv(self):
        argv = [sys.executable, '-m', 'nova_pinning_hooks.cmd.pinning']
        for path in self.conf.config_file or ():
            argv += ['--config-file', path]
        for path in getattr(self.conf, 'config_dir', None) or ():
            argv += ['--config-dir', path]
        return argv + ['rebind']

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


def activate(conf, manager_cls=None):
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
        # Load the hooks now, not on nova's thread at its first operation.
        from nova_pinning_hooks.nova import hooks
        hooks.manager(conf.nova_pinning.hook_name)
        _AGENT = Agent(conf)
        _AGENT.start()
        LOG.info('nova-pinning-hooks: active (%s passes)',
                 'out-of-process' if _AGENT.out_of_process else 'threaded')
        return _AGENT


def request_pass(reason):
    """Queue a pass; returns at once. Without an agent, does nothing."""
    agent = _AGENT
    if agent is None:
        return False
    return agent.coalescer.request(reason)


def current():
    return _AGENT


def deactivate():
    """Stop the agent (tests; nova-compute simply exits)."""
    global _AGENT
    with _ACTIVATION_LOCK:
        agent, _AGENT = _AGENT, None
    if agent is not None:
        agent.stop()
