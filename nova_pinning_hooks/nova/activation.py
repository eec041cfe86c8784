"""Switching nova-pinning-hooks on inside nova-compute.

``activate(conf)`` (called once by the notifier switch) checks that this
nova has what the package wraps (``compat``), makes the package bind
nova's own libvirt connection, installs the hook points (and, on the
libvirt driver, the allocation-ratio hook and the live migration XML
filter, ``migration``), then starts the passes (``passrunner.make``:
overcommit file, first pass, vCPU polls, periodic safety net). Hooks call
``request_pass``, which only queues. Switched off (``[nova_pinning]
enabled = false``) it installs the XML filter alone: guests keep the
live pins of earlier passes until they restart, and the filter keeps
them from reaching another host or a guest's definition.

Invariants:

* idempotent: one ``passrunner.PassRunner`` a process, made under a lock;
* the configuration edge inside nova-compute: ``[nova_pinning]`` and
  nova's own options are read here, once, into records
  (``runtime.settings.read``, ``ratiofile.NovaOptions.read``), before anything
  is installed; nothing below is handed nova's configuration;
* all or nothing: no hook is installed unless ``compat.lacking`` found
  nothing missing;
* inside nova-compute the package binds the guests of nova's own libvirt
  connection: unless ``[nova_pinning] connection_uri`` is set (in a file,
  on the command line or by an override), it becomes the URI nova's
  libvirt driver opens (``[libvirt] connection_uri``, or the one nova
  derives from ``[libvirt] virt_type``: ``qemu:///system`` for kvm and
  qemu), for the pass thread and, with ``--connection``, the worker
  process;
* eventlet is never imported here, nor libvirt;
* every failure is logged; none reaches nova.
"""

import os
import sys
import threading
import types
import typing
from importlib import metadata

from oslo_config import cfg
from oslo_log import log as logging

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.nova import compat
from nova_pinning_hooks.nova import hookpoints
from nova_pinning_hooks.nova import hooks
from nova_pinning_hooks.nova import migration
from nova_pinning_hooks.nova import nodesummary
from nova_pinning_hooks.nova import passrunner
from nova_pinning_hooks.nova import ratiofile
from nova_pinning_hooks.runtime import settings as runtime_settings

LOG = logging.getLogger(__name__)
RATIO_HOOK = 'nova_pinning_allocation_ratio'
SUMMARY_HOOK = 'nova_pinning_node_summary'

# Where an option's value comes from when nobody set it.
_UNSET = (cfg.Locations.opt_default, cfg.Locations.set_default)

_RUNTIME: typing.Optional[passrunner.PassRunner] = None
_REPORTER: typing.Optional[nodesummary.Reporter] = None
_ACTIVATION_LOCK = threading.Lock()


def in_nova_compute() -> bool:
    """True in the nova-compute service (not api, conductor, ...)."""
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ''
    return 'nova.cmd.compute' in sys.modules or argv0 == 'nova-compute'


def nova_connection_uri(conf: cfg.ConfigOpts) -> typing.Optional[str]:
    """The libvirt URI nova's libvirt driver opens, from nova's options
    in ``conf``; None where they are not registered (out of nova)."""
    try:
        uri = conf.libvirt.connection_uri
        virt_type = conf.libvirt.virt_type
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return None
    return conf_mod.nova_uri(uri, virt_type)


def follow_nova_connection(conf: cfg.ConfigOpts) -> str:
    """Unless ``[nova_pinning] connection_uri`` is set, make it nova's
    own libvirt connection; returns the URI passes use."""
    group = conf_mod.PINNING_GROUP
    ours: str = conf.nova_pinning.connection_uri
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


def _install_driver_hooks(driver_cls: type,
                          migration_module: types.ModuleType) -> None:
    """The allocation-ratio hook and the live migration XML filter, on
    nova's libvirt driver (``compat.lacking`` checked them first)."""
    hookpoints.install(driver_cls, ['update_provider_tree'], RATIO_HOOK)
    migration.install(module=migration_module, driver_cls=driver_cls)


def _nova_libvirt(driver_cls: typing.Optional[type],
                  migration_module: typing.Optional[types.ModuleType]
                  ) -> tuple[typing.Optional[type],
                             typing.Optional[types.ModuleType]]:
    """nova's LibvirtDriver and libvirt migration module, unless given;
    (None, None) when this nova has no libvirt driver to import."""
    try:
        return (driver_cls or migration._driver_class(),
                migration_module or migration._module())
    except Exception as exc:  # ImportError, or nova failing to import
        LOG.debug('nova-pinning-hooks: nova.virt.libvirt: %s', exc)
        return None, None


def _tracker_class() -> typing.Optional[type]:
    """nova's ResourceTracker, or None (logged) where it cannot be
    imported."""
    try:
        from nova.compute import resource_tracker
        cls: type = resource_tracker.ResourceTracker  # nova's: untyped
        return cls
    except Exception as exc:  # ImportError, or nova failing to import
        LOG.warning('nova-pinning-hooks: nova.compute.resource_tracker: '
                    '%s: no summary reported to nova\'s scheduler', exc)
        return None


def _switched_off(driver_cls: typing.Optional[type],
                  migration_module: typing.Optional[types.ModuleType]
                  ) -> bool:
    """``[nova_pinning] enabled = false``: no hook, no pass, no file; only
    the filter that keeps our pins out of the XML nova builds from a
    running guest (live migration, unrescue). Guests pinned before the
    switch keep those live pins until they restart, and without the
    filter nova would carry them to another host, or into the guest's
    definition. Returns True when the filter is in place."""
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


def activate(conf: cfg.ConfigOpts,
             manager_cls: typing.Optional[type] = None,
             driver_cls: typing.Optional[type] = None,
             migration_module: typing.Optional[types.ModuleType] = None,
             tracker_cls: typing.Optional[type] = None
             ) -> typing.Optional[passrunner.PassRunner]:
    """Switch nova-pinning-hooks on in this nova-compute; idempotent.

    Returns the ``passrunner.PassRunner``, or None when switched off (only the
    XML filter installed: ``_switched_off``), or when this nova lacks
    something the package relies on (``compat``: one error line, nothing
    installed). With ``report_summary``, the resource tracker's
    ``_update`` (``tracker_cls``, nova's by default) reports the plan's
    summary to nova's scheduler (``nodesummary``); a nova without it
    runs on without (logged).
    """
    global _RUNTIME, _REPORTER
    with _ACTIVATION_LOCK:
        if _RUNTIME is not None:
            return _RUNTIME
        conf_mod.register_opts(conf)
        if not conf.nova_pinning.enabled:
            _switched_off(driver_cls, migration_module)
            return None
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
        # Neither is None: ``compat.lacking`` said so.
        assert driver_cls is not None and migration_module is not None
        follow_nova_connection(conf)  # before anything is installed
        # The configuration, read once (after the connection's override).
        config = runtime_settings.read(conf)
        nova = ratiofile.NovaOptions.read(conf)
        hookpoints.install(manager_cls, conf.nova_pinning.hooked_methods,
                           conf.nova_pinning.hook_name)
        _install_driver_hooks(driver_cls, migration_module)
        # Load the hooks now, not on nova's thread at its first operation.
        hooks.manager(conf.nova_pinning.hook_name)
        hooks.manager(RATIO_HOOK)
        _RUNTIME = passrunner.make(config, nova)
        if config.report_summary:
            tracker_cls = tracker_cls or _tracker_class()
            if tracker_cls is not None and \
                    nodesummary.install(tracker_cls, SUMMARY_HOOK):
                hooks.manager(SUMMARY_HOOK)
                _REPORTER = nodesummary.Reporter(
                    _RUNTIME.basis, config.passes.times.summary_max_age)
        _RUNTIME.start()
        LOG.info('nova-pinning-hooks: active (%s passes); %s',
                 'out-of-process' if _RUNTIME.out_of_process else 'threaded',
                 _nova_seen())
        return _RUNTIME


def _nova_seen() -> str:
    """What ``compat`` saw of this nova, for the activation line (a
    rolling upgrade's log says which nova each compute ran)."""
    try:
        version = metadata.version('nova')
    except metadata.PackageNotFoundError:
        return 'nova of no installed distribution, every part found'
    return 'nova %s, every part found%s' % (
        version, '' if compat.tested(version) else
        ' (not a tested release: %d to %d are)' % compat.TESTED)


def request_pass(reason: str, host: typing.Optional[str] = None) -> bool:
    """Queue a pass; returns at once. Not activated: does nothing."""
    agent = _RUNTIME
    if agent is None:
        return False
    return agent.request(reason, host)


def note_allocation_ratio(ratio: float,
                          node: typing.Optional[str] = None) -> bool:
    """The VCPU allocation ratio nova just reported
    (``ratiofile.RatioFile.note``)."""
    agent = _RUNTIME
    if agent is None:
        return False
    return agent.note_allocation_ratio(ratio, node)


def report_summary(compute_node: typing.Any,
                   tracked: typing.Optional[typing.Collection[str]]
                   ) -> typing.Optional[str]:
    """Put the plan's summary in ``compute_node``'s stats
    (``nodesummary.Reporter.update``); not activated: does nothing."""
    reporter = _REPORTER
    if reporter is None:
        return None
    return reporter.update(compute_node, tracked)


def deactivate() -> None:
    """Stop the runtime (tests; nova-compute simply exits)."""
    global _RUNTIME, _REPORTER
    with _ACTIVATION_LOCK:
        agent, _RUNTIME = _RUNTIME, None
        _REPORTER = None
    if agent is not None:
        agent.stop()
