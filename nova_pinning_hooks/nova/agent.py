"""The runtime of nova-pinning-hooks inside nova-compute.

``activate(conf)`` (called once by the notifier switch) writes the
overcommit file from nova's configuration, installs the hook points
(and, on the libvirt driver, the allocation-ratio hook and the live
migration XML filter, ``nova.migration``), queues a first pass and starts
the periodic safety net. Hooks call ``request_pass``, which only queues.
Switched off (``[nova_pinning] enabled = false``) it installs the XML
filter alone: guests keep the live pins of earlier passes until they
restart, and the filter keeps them from reaching another host or a
guest's definition.

The allocation ratio that passes use is the one nova last put into the
node's VCPU inventory (``update_provider_tree``): placement's, unless
``cpu_allocation_ratio`` overrides it. It is rewritten into the
overcommit file by the pass worker, before the pass, whenever it
changes, with its source (``placement``, or the option that set it).

Invariants:

* nothing here blocks a caller: requests go to a ``Coalescer`` whose
  worker runs the passes;
* in native-thread nova the worker is a daemon thread running the pass in
  this process, with a ``model.HostModel`` so that each pass reads only
  the domains that are new or re-created (and all of them every
  ``resync_interval``). libvirt's event loop is process-wide and nova's
  driver registers and runs it (in ``init_host``); once ``init_host``
  has returned, the pass thread reopens its connection with our domain
  events on it (``virt.Host.watch``), and nova's event thread delivers
  them: each callback marks the model and queues a request, nothing
  more, so nova's loop is never held. Before that, and if nova's loop
  is absent, the hooks and the periodic pass drive the passes.
* when eventlet has monkey-patched ``threading`` (older nova, or
  ``concurrency_backend = eventlet``) a libvirt call would freeze every
  green thread, so passes run in one long-lived worker process,
  ``nova-pinning agent --requests-on-stdin`` with nova's own
  configuration files (``service.BindingService``: its own connection,
  model and libvirt events); each request is one line written to its
  standard input without blocking, and a worker that died is started
  again at the next request;
* eventlet is never imported here: its state is read from ``sys.modules``
  only when nova already loaded it;
* after each pass, with ``[nova_pinning] metrics_textfile`` set, the
  Prometheus textfile is rewritten (``passmetrics.PassMetrics``) by whoever
  ran the pass: the pass thread here, or the worker process. A port is
  opened only with ``[nova_pinning] metrics_listen`` set, by the same
  (``httpserve``: bounded threads and time); a metrics failure is a
  logged warning or error, never a failed pass;
* inside nova-compute the package binds the guests of nova's own libvirt
  connection: unless ``[nova_pinning] connection_uri`` is set (in a file,
  on the command line or by an override), it becomes the URI nova's
  libvirt driver opens (``[libvirt] connection_uri``, or the one nova
  derives from ``[libvirt] virt_type``: ``qemu:///system`` for kvm and
  qemu), for the pass thread and, with ``--connection``, the worker
  process;
* every failure is logged; none reaches nova.
"""

import collections
import errno
import fcntl
import os
import subprocess
import sys
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.host import model as model_mod
from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.observe import passmetrics
from nova_pinning_hooks.passes import coalescer as coalescer_mod
from nova_pinning_hooks.passes import overcommit
from nova_pinning_hooks.passes import reconciler

LOG = logging.getLogger(__name__)
RATIO_HOOK = 'nova_pinning_allocation_ratio'

# The URI nova's libvirt driver opens when [libvirt] connection_uri is
# empty, by [libvirt] virt_type (LibvirtDriver._uri); kvm and qemu: the
# default.
NOVA_URIS = {'lxc': 'lxc:///', 'parallels': 'parallels:///system'}
NOVA_URI = 'qemu:///system'
# Where an option's value comes from when nobody set it.
_UNSET = (cfg.Locations.opt_default, cfg.Locations.set_default)

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
        self.model = None if self.out_of_process else model_mod.HostModel()
        self.reconciler = (None if self.out_of_process
                           else reconciler.Reconciler(conf,
                                                      model=self.model))
        # In-process events: wanted once nova's event loop runs
        # (after init_host), registered on the pass thread.
        self.events_wanted = False
        self.watching = False
        self.worker = None  # the agent process, when out of process
        self.worker_starts = 0
        self.coalescer = coalescer_mod.Coalescer(
            self._run_pass, delay=group.coalesce_delay)
        self.interval = group.periodic_interval
        self._stop = threading.Event()
        self._timer = None
        self.last_result = None
        self.pass_metrics = passmetrics.PassMetrics(conf, LOG)
        self.ratio = None  # the ratio last written to the overcommit file
        self._pending_ratio = None
        # The ratio nova last reported (None: none yet) and the one the
        # file holds as such: the first report rewrites the file, even
        # with the ratio it already has, so that it says "placement".
        self.reported_ratio = None
        self.written_ratio = None
        # The overcommit file holds this process's configuration; until
        # it does no pass runs (``overcommit_error`` says why).
        self.overcommit_ok = False
        self.overcommit_error = None
        # The node whose inventory sets the ratio: a libvirt nova-compute
        # has one; the first to report is it (several only in tests that
        # run many computes in one process).
        self.node = None
        # (monotonic time, host, reason) of recent requests: diagnostics.
        self.requests = collections.deque(maxlen=1000)

    def request(self, reason, host=None):
        """Queue a pass (never blocks: see ``Coalescer.request``)."""
        self.requests.append((time.monotonic(), host, reason))
        if reason == 'init_host' and not self.out_of_process:
            self.events_wanted = True  # nova's event loop runs now
        return self.coalescer.request(reason)

    def _event(self, reason):
        """A libvirt event (on nova's event thread): queue, return."""
        self.requests.append((time.monotonic(), None, reason))
        return self.coalescer.request(reason)

    def _watch(self):
        """On the pass thread: our events on a fresh connection, now that
        nova's driver registered and runs libvirt's event loop."""
        self.watching = True  # once, whatever happens
        try:
            self.reconciler.host().watch(self.model, self._event)
            LOG.info('nova-pinning-hooks: following libvirt domain events')
        except Exception as exc:
            LOG.warning('nova-pinning-hooks: libvirt events not followed '
                        '(%s: %s); hooks and periodic passes only',
                        type(exc).__name__, exc)

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
        if ratio == self.written_ratio or ratio == self._pending_ratio:
            return False
        self._pending_ratio = ratio
        return self.request('allocation ratio now %s' % ratio)

    def start(self):
        self.write_overcommit()
        if not self.out_of_process:  # else the worker process serves
            self.start_endpoint()
        self.coalescer.request('service start')
        if self.interval:
            self._timer = threading.Thread(
                target=self._periodic, name='nova-pinning-periodic',
                daemon=True)
            self._timer.start()

    def start_endpoint(self):
        """With ``[nova_pinning] metrics_listen`` set, serve the metrics
        with this thread's pass counters; a failure (bad value, port
        taken) is a logged error, nova-compute runs on."""
        try:
            listen = self.conf.nova_pinning.metrics_listen
            if not listen:
                return False
            from nova_pinning_hooks.observe import httpserve
            self.pass_metrics.start_endpoint(httpserve.parse_listen(listen))
        except Exception as exc:
            LOG.error('nova-pinning-hooks: metrics not served: %s: %s',
                      type(exc).__name__, exc)
            return False
        return True

    def write_overcommit(self, ratio=None):
        """Write the overcommit file from nova's configuration (and the
        ratio nova reported, if any). When it cannot be written, what is
        on disk is used only if it holds the same ratio and CPU sets;
        else it is set aside as stale and no pass runs until a write
        succeeds (``_run_pass`` tries again before each)."""
        path = self.conf.nova_pinning.overcommit_file
        content = None
        try:
            content = overcommit.from_nova_conf(self.conf, ratio)
            # Only this service writes the file: what a crash left of an
            # earlier write is garbage.
            safefs.remove_stale_temporaries(path)
            overcommit.write(path, content)
        except Exception as exc:
            self._not_written(path, content, exc, ratio)
            return False
        self.ratio = content['allocation_ratio']
        self.written_ratio = ratio
        self.overcommit_ok, self.overcommit_error = True, None
        LOG.info('nova-pinning-hooks: wrote %s: allocation ratio %s (%s)',
                 path, content['allocation_ratio'], content['ratio_source'])
        return True

    def _not_written(self, path, content, exc, ratio):
        if content is not None and overcommit.matches(path, content):
            # Same ratio and CPU sets as this process computed: right.
            self.ratio, self.written_ratio = content['allocation_ratio'], ratio
            self.overcommit_ok, self.overcommit_error = True, None
            LOG.warning('nova-pinning-hooks: cannot rewrite the overcommit '
                        'file %s: %s; it holds this configuration (ratio '
                        '%s, the same CPU sets) and is used', path, exc,
                        content['allocation_ratio'])
            return
        try:
            stale = overcommit.stale_path(path)
            what = ('the old one, which does not hold this configuration, '
                    'is set aside as %s' % stale
                    if overcommit.set_aside(path) or os.path.lexists(stale)
                    else 'there is no old one')
        except OSError as aside:
            what = ('the old one could not be set aside (%s); passes '
                    'elsewhere may read it' % (aside.strerror or aside))
        message = ('cannot write the overcommit file %s: %s; %s; no pass '
                   'runs until it is written (tried again before each '
                   'pass)' % (path, getattr(exc, 'strerror', None) or exc,
                              what))
        self.overcommit_ok = False
        if message != self.overcommit_error:  # once, not every pass
            LOG.error('nova-pinning-hooks: %s', message)
        self.overcommit_error = message

    def _periodic(self):
        while not self._stop.wait(self.interval):
            self.coalescer.request('periodic')

    def _run_pass(self):
        ratio, self._pending_ratio = self._pending_ratio, None
        if ratio is not None:
            self.reported_ratio = ratio
        if not self.overcommit_ok or \
                self.reported_ratio != self.written_ratio:
            self.write_overcommit(self.reported_ratio)
        if not self.overcommit_ok:
            # The file on disk is not this configuration (or is gone): a
            # pass would bind with another process's CPU sets or ratio.
            self.last_result = reconciler.PassResult(
                error=self.overcommit_error, error_kind='failed')
            return
        if self.out_of_process:
            self.last_result = self._pass_in_child()
        else:
            if self.events_wanted and not self.watching:
                self._watch()
            self.last_result = self.reconciler.run_pass()
            self.pass_metrics.after_pass(self.reconciler, self.last_result)

    def child_argv(self):
        argv = [sys.executable, '-m', 'nova_pinning_hooks.cmd.pinning']
        for path in self.conf.config_file or ():
            argv += ['--config-file', path]
        for path in getattr(self.conf, 'config_dir', None) or ():
            argv += ['--config-dir', path]
        # nova's connection (follow_nova_connection) is in no file the
        # worker reads.
        return argv + ['agent', '--connection',
                       self.conf.nova_pinning.connection_uri,
                       '--requests-on-stdin']

    def _pass_in_child(self):
        """Hand the request to the worker process (started, or started
        again, here); True once written."""
        worker = self.worker
        if worker is None or worker.poll() is not None:
            if worker is not None:
                LOG.error('nova-pinning-hooks: pass worker exited %s; '
                          'starting it again', worker.returncode)
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
            fd = worker.stdin.fileno()
            fcntl.fcntl(fd, fcntl.F_SETFL,
                        fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        try:
            os.write(worker.stdin.fileno(), b'pass\n')
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                return True  # the pipe is full: passes are pending
            LOG.error('nova-pinning-hooks: pass worker unreachable: %s',
                      exc)
            return False
        return True

    def stop(self):
        self._stop.set()
        self.coalescer.stop()
        self.pass_metrics.close()
        if self.reconciler is not None:
            self.reconciler.close()
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.stdin.close()  # its end of input: it stops
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                worker.kill()


def in_nova_compute():
    """True in the nova-compute service (not api, conductor, ...)."""
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ''
    return 'nova.cmd.compute' in sys.modules or argv0 == 'nova-compute'


def nova_connection_uri(conf):
    """The libvirt URI nova's libvirt driver opens, from nova's options
    in ``conf``; None where they are not registered (out of nova)."""
    try:
        uri = conf.libvirt.connection_uri
        virt_type = conf.libvirt.virt_type
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return None
    return uri or NOVA_URIS.get(virt_type, NOVA_URI)


def follow_nova_connection(conf):
    """Unless ``[nova_pinning] connection_uri`` is set, make it nova's
    own libvirt connection; returns the URI passes use."""
    group = conf_mod.PINNING_GROUP
    ours = conf.nova_pinning.connection_uri
    if conf.get_location('connection_uri', group).location not in _UNSET:
        LOG.info('nova-pinning-hooks: libvirt connection %s ([%s] '
                 'connection_uri)', ours, group)
        return ours
    uri = nova_connection_uri(conf)
    if uri is None:
        return ours
    conf.set_override('connection_uri', uri, group=group)
    LOG.info('nova-pinning-hooks: libvirt connection %s (nova\'s: '
             '[libvirt] connection_uri%s)', uri,
             '' if conf.libvirt.connection_uri else
             ' unset, virt_type %s' % conf.libvirt.virt_type)
    return uri


def _install_driver_hooks(driver_cls, migration_module):
    """The allocation-ratio hook and the live migration XML filter, on
    nova's libvirt driver (``compat.lacking`` checked them first)."""
    from nova_pinning_hooks.nova import hookpoints
    from nova_pinning_hooks.nova import migration
    hookpoints.install(driver_cls, ['update_provider_tree'], RATIO_HOOK)
    migration.install(module=migration_module, driver_cls=driver_cls)


def _nova_libvirt(driver_cls, migration_module):
    """nova's LibvirtDriver and libvirt migration module, unless given;
    (None, None) when this nova has no libvirt driver to import."""
    from nova_pinning_hooks.nova import migration
    try:
        return (driver_cls or migration._driver_class(),
                migration_module or migration._module())
    except Exception as exc:  # ImportError, or nova failing to import
        LOG.debug('nova-pinning-hooks: nova.virt.libvirt: %s', exc)
        return None, None


def _switched_off(driver_cls, migration_module):
    """``[nova_pinning] enabled = false``: no hook, no pass, no file; only
    the filter that keeps our pins out of the XML nova builds from a
    running guest (live migration, unrescue). Guests pinned before the
    switch keep those live pins until they restart, and without the
    filter nova would carry them to another host, or into the guest's
    definition. Returns True when the filter is in place."""
    from nova_pinning_hooks.nova import migration
    driver_cls, migration_module = _nova_libvirt(driver_cls,
                                                 migration_module)
    if driver_cls is None or migration_module is None:
        LOG.info('nova-pinning-hooks: disabled ([nova_pinning] enabled = '
                 'false); no libvirt driver here: nothing installed')
        return False
    if not migration.install(module=migration_module,
                             driver_cls=driver_cls):
        LOG.error('nova-pinning-hooks: disabled ([nova_pinning] enabled = '
                  'false), and this nova lacks what the pin filter wraps: '
                  'live migration and unrescue may carry pins set before')
        return False
    LOG.info('nova-pinning-hooks: disabled ([nova_pinning] enabled = '
             'false): no hook, no pass; live migration and unrescue XML '
             'filtered of the pins set before')
    return True


def activate(conf, manager_cls=None, driver_cls=None,
             migration_module=None):
    """Switch nova-pinning-hooks on in this nova-compute; idempotent.

    Returns the Agent, or None when switched off (only the XML filter
    installed: ``_switched_off``), or when this nova lacks something the
    package relies on (``compat``: one error line, nothing installed).
    """
    global _AGENT
    with _ACTIVATION_LOCK:
        if _AGENT is not None:
            return _AGENT
        conf_mod.register_opts(conf)
        if not conf.nova_pinning.enabled:
            _switched_off(driver_cls, migration_module)
            return None
        from nova_pinning_hooks.nova import compat
        from nova_pinning_hooks.nova import hookpoints
        if manager_cls is None:
            from nova.compute import manager as compute_manager
            manager_cls = compute_manager.ComputeManager
        driver_cls, migration_module = _nova_libvirt(driver_cls,
                                                     migration_module)
        lacking = compat.lacking(driver_cls, migration_module)
        if lacking:
            LOG.error('nova-pinning-hooks: not activated, nothing hooked: '
                      'this nova lacks %s', ', '.join(lacking))
            return None
        follow_nova_connection(conf)  # before anything is installed
        hookpoints.install(manager_cls, conf.nova_pinning.hooked_methods,
                           conf.nova_pinning.hook_name)
        _install_driver_hooks(driver_cls, migration_module)
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
