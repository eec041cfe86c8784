"""Test fixtures shipped with the tests: the fake libvirt, patched in.

Example::

    fake = self.useFixture(FakeLibvirtFixture(hosts.load('small-1node')))
    fake.host.add_domain('g1', vcpus=2, memory_by_node_kib={'0': 65536})
    host = virt.connect('qemu:///system', host_options())
    snap = host.read_snapshot()

``FakeLibvirtFixture`` swaps ``nova_pinning_hooks.host.libvirtapi.libvirt``
(the one place the package touches libvirt) for ``tests.fakelibvirt`` and
serves each domain's memory placement from the fake instead of /proc.
"""

import threading
import time

import fixtures
from oslo_config import cfg

from tests import fakelibvirt



def host_options(**overrides):
    """``virt.HostOptions`` with conf.py's defaults, and ``overrides``."""
    from nova_pinning_hooks import conf as conf_mod
    from nova_pinning_hooks.passes import settings
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    conf([], default_config_files=[])
    for name, value in overrides.items():
        conf.set_override(name, value, group='nova_pinning')
    return settings.read(conf).host


def pass_runner(conf, out_of_process):
    """The in-nova pass runner ``activation.activate`` would make from
    ``conf`` (nova's options registered), in the mode asked for."""
    from nova_pinning_hooks.nova import passrunner
    from nova_pinning_hooks.nova import ratiofile
    from nova_pinning_hooks.runtime import settings
    return passrunner.make(settings.read(conf),
                           ratiofile.NovaOptions.read(conf),
                           out_of_process=out_of_process)

class FakeLibvirtFixture(fixtures.Fixture):

    def __init__(self, capabilities, uri='qemu:///system'):
        super().__init__()
        self.capabilities = capabilities
        self.uri = uri

    def _setUp(self):
        self.host = fakelibvirt.FakeHost(self.capabilities)
        fakelibvirt.register(self.uri, self.host)
        self.addCleanup(fakelibvirt.unregister, self.uri)
        # A call a test left blocked must not make the next test's
        # daemon "not answer" (the registry is process-wide).
        from nova_pinning_hooks.host import hung
        hung.forget(self.uri)
        self.addCleanup(hung.forget, self.uri)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.libvirtapi.libvirt', fakelibvirt))
        # Errors libvirtapi.py classifies were read from the real module at
        # import; the fake uses the same numbers, so they still match.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.virtread.Reader._memory_from_proc',
            lambda _self, name: dict(
                self.host.by_name(name).memory_by_node_kib)))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.host.virtread.Reader._arrived_from_proc',
            lambda _self, name: self.host.by_name(name).arrived))


def register_nova_options(conf, initial_cpu_allocation_ratio=4.0):
    """Register, on ``conf``, the nova options the in-nova agent reads
    (for tests and benchmarks that run without nova installed)."""
    from oslo_config import cfg
    conf.register_opts([
        cfg.FloatOpt('cpu_allocation_ratio'),
        cfg.FloatOpt('initial_cpu_allocation_ratio',
                     default=initial_cpu_allocation_ratio),
        cfg.IntOpt('reserved_host_cpus', default=0),
        cfg.StrOpt('vcpu_pin_set'),
        cfg.StrOpt('host', default='compute-test')])
    conf.register_opts([cfg.StrOpt('cpu_shared_set'),
                        cfg.StrOpt('cpu_dedicated_set')], group='compute')


def run_agent(test, agent, join_timeout=10):
    """Run ``agent`` (a ``service.BindingService``) on a daemon thread
    until ``test`` ends: stopped, then joined, at its cleanup."""
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    thread.start()
    test.addCleanup(thread.join, join_timeout)
    test.addCleanup(stop.set)
    return agent


def passes_beyond(coalescer, passes, timeout=30.0):
    """True once ``coalescer`` has counted more than ``passes`` passes.

    A pass counts itself when it ends, after its writes: a test that saw
    the pass's pin in libvirt or /proc may still be ahead of its count,
    the more so on a loaded machine (CI saw "1 not greater than 1")."""
    deadline = time.monotonic() + timeout
    while coalescer.passes <= passes:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def current_runtime():
    """The pass runner ``activation.activate`` made in this process, or None
    (what was ``activation.current``; only the tests ask)."""
    from nova_pinning_hooks.nova import activation
    return activation._RUNTIME


def uninstall_migration_filter(module=None, driver_cls=None):
    """Undo ``migration.install``: nova's live migration XML function and
    its driver's existing-XML method as they were (what was
    ``migration.uninstall``; only the tests undo it). ``module`` and
    ``driver_cls`` default to nova's, as for ``install``."""
    from nova_pinning_hooks.nova import migration

    def unwrap(owner, name):
        current = owner.__dict__.get(name) if isinstance(owner, type) else \
            getattr(owner, name, None)
        if current is not None and getattr(current, migration.MARK, False):
            setattr(owner, name, current.__wrapped__)

    unwrap(module or migration._module(), migration.FUNCTION)
    unwrap(driver_cls or migration._driver_class(), migration.METHOD)


class FakeNovaLibvirtFixture(fixtures.Fixture):
    """Stands in for nova's libvirt driver class and libvirt migration
    module where nova is not installed (unit and functional tests), with
    what ``nova_pinning_hooks.nova.compat`` requires; ``activation.activate``
    finds them through ``migration._driver_class``/``_module``."""

    def _setUp(self):
        import types

        class LibvirtDriver:
            def update_provider_tree(self, provider_tree, nodename,
                                     allocations=None):
                return None

            def _get_existing_domain_xml(self, instance, network_info,
                                         block_device_info=None):
                return '<domain/>'

        self.driver_cls = LibvirtDriver
        self.module = types.ModuleType('fake_nova_libvirt_migration')
        self.module.get_updated_guest_xml = lambda *a, **k: '<domain/>'
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.migration._driver_class',
            lambda: self.driver_cls))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.migration._module',
            lambda: self.module))

        class ResourceTracker:
            """nova's, as far as the summary's hook reads it."""

            def __init__(self, tracked=()):
                self.tracked_instances = set(tracked)
                self.saved = []

            def _update(self, context, compute_node, startup=False):
                self.saved.append(dict(compute_node.stats))

        self.tracker_cls = ResourceTracker
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.activation._tracker_class',
            lambda: self.tracker_cls))
