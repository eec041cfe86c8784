"""The VCPU allocation ratio from nova's provider tree, and the live
migration XML filter, on stand-ins for nova's driver and module."""

import types

from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.nova import hook
from nova_pinning_hooks.nova import hookpoints
from nova_pinning_hooks.nova import ratiofile
from nova_pinning_hooks.nova import migration
from nova_pinning_hooks.host import overcommitfile
from tests.fixtures import uninstall_migration_filter
from tests.unit.nova.test_activation import AgentTestCase
from tests.unit.engine.test_migratexml import NOVA_GUEST
from tests.unit.engine.test_migratexml import NUMA
from tests.unit.novaconf import nova_like_conf


class FakeTree:
    """nova's ProviderTree, as far as the hook reads it."""

    def __init__(self):
        self.inventory = {}

    def data(self, name):
        return types.SimpleNamespace(inventory=dict(self.inventory))


class FakeDriver:
    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        provider_tree.inventory = {'VCPU': {
            'total': 2, 'allocation_ratio': self.ratio}}

    def _get_existing_domain_xml(self, instance, network_info,
                                 block_device_info=None):
        return '<domain/>'


class TestRatioFromTheProviderTree(AgentTestCase):

    def setUp(self):
        super().setUp()
        self.driver_cls = type('Driver', (FakeDriver,), {})
        self.conf = nova_like_conf(self)
        self.agent = activation.activate(self.conf, manager_cls=self.cls,
                                    driver_cls=self.driver_cls)
        self.path = self.conf.nova_pinning.overcommit_file
        self.assertTrue(self.agent.coalescer.request('settle', wait=True,
                                                     timeout=10))

    def report(self, ratio):
        driver = self.driver_cls()
        driver.ratio = ratio
        driver.update_provider_tree(FakeTree(), 'node1')
        self.assertTrue(self.agent.coalescer.request('settle', wait=True,
                                                     timeout=10))

    def test_the_file_follows_placement(self):
        info = overcommitfile.read(self.path)
        self.assertEqual((4.0, 'initial_cpu_allocation_ratio'),
                         (info.allocation_ratio, info.ratio_source))
        self.report(16.0)  # an operator set 16 in placement
        info = overcommitfile.read(self.path)
        self.assertEqual((16.0, 'placement'),
                         (info.allocation_ratio, info.ratio_source))
        written = info.written_at
        self.report(16.0)  # unchanged: not written again
        self.assertEqual(written, overcommitfile.read(self.path).written_at)
        self.assertEqual(16.0, self.agent.ratio_file.ratio)

    def test_placement_is_named_once_nova_reported_the_same_ratio(self):
        # Issue 34 R6: the file was rewritten only when the number
        # changed, so a placement ratio equal to the initial one was
        # shown as initial_cpu_allocation_ratio after every start.
        info = overcommitfile.read(self.path)
        self.assertEqual((4.0, 'initial_cpu_allocation_ratio'),
                         (info.allocation_ratio, info.ratio_source))
        self.report(4.0)
        info = overcommitfile.read(self.path)
        self.assertEqual((4.0, 'placement'),
                         (info.allocation_ratio, info.ratio_source))
        written = info.written_at
        self.report(4.0)  # the same report: not written again
        self.assertEqual(written, overcommitfile.read(self.path).written_at)

    def test_a_configured_ratio_is_named_as_such(self):
        self.conf.set_override('cpu_allocation_ratio', 2.0)
        # nova's options are read once, at activation, as nova-compute
        # reads its own at its start: this one, as if it had been set.
        self.agent.ratio_file.nova = ratiofile.NovaOptions.read(self.conf)
        self.report(2.0)
        info = overcommitfile.read(self.path)
        self.assertEqual((2.0, 'cpu_allocation_ratio'),
                         (info.allocation_ratio, info.ratio_source))

    def test_a_broken_tree_never_reaches_nova(self):
        class Broken(FakeDriver):
            def update_provider_tree(self, provider_tree, nodename,
                                     allocations=None):
                return 'nova result'
        hookpoints.install(Broken, ['update_provider_tree'],
                           activation.RATIO_HOOK)
        self.assertEqual('nova result', Broken().update_provider_tree(
            None, 'node1'))

    def test_hook_reads_keyword_arguments_too(self):
        tree = FakeTree()
        tree.inventory = {'VCPU': {'allocation_ratio': 3.0}}
        hook.AllocationRatioHook().post(None, object(), provider_tree=tree,
                                        nodename='n')
        self.assertEqual(3.0, self.agent.ratio_file._pending_ratio)


class TestMigrationFilter(AgentTestCase):

    def setUp(self):
        super().setUp()
        self.xml = NOVA_GUEST
        self.module = types.ModuleType('fake_nova_migration')
        self.module.get_updated_guest_xml = lambda *a, **k: self.xml
        test = self

        class Driver:
            def _get_existing_domain_xml(self, instance, network_info,
                                         block_device_info=None):
                return test.xml
        self.driver_cls = Driver

    def install(self):
        return migration.install(self.module, self.driver_cls)

    def test_strips_ours_keeps_nova_placed_and_never_fails(self):
        self.assertTrue(self.install())
        self.assertTrue(self.install())  # idempotent
        out = self.module.get_updated_guest_xml('instance', 'guest', 'md')
        self.assertNotIn('vcpupin', out)
        self.assertIn('<shares>2048</shares>', out)
        self.xml = NUMA
        self.assertEqual(NUMA, self.module.get_updated_guest_xml())
        self.xml = '<not xml'
        self.assertEqual('<not xml', self.module.get_updated_guest_xml())
        uninstall_migration_filter(self.module, self.driver_cls)
        self.xml = NOVA_GUEST
        self.assertIn('vcpupin', self.module.get_updated_guest_xml())

    def test_xml_kept_for_unrescue_and_resume_has_no_pins_of_ours(self):
        # rescue saves this XML as unrescue.xml and unrescue defines it
        # as the persistent domain: our live-only pins must not go there.
        driver = self.driver_cls()
        self.assertIn('vcpupin', driver._get_existing_domain_xml('i', 'n'))
        self.assertTrue(self.install())
        self.assertTrue(self.install())  # idempotent: wrapped once
        out = driver._get_existing_domain_xml('i', 'n',
                                              block_device_info=None)
        self.assertNotIn('vcpupin', out)
        self.assertIn('<shares>2048</shares>', out)
        self.xml = NUMA  # nova-placed: nova's own pins stay
        self.assertEqual(NUMA, driver._get_existing_domain_xml('i', 'n'))
        self.xml = '<not xml'
        self.assertEqual('<not xml', driver._get_existing_domain_xml('i', 'n'))
        uninstall_migration_filter(self.module, self.driver_cls)
        self.xml = NOVA_GUEST
        self.assertIn('vcpupin', driver._get_existing_domain_xml('i', 'n'))

    def test_a_nova_without_the_function(self):
        self.assertFalse(migration.install(types.ModuleType('empty'),
                                           self.driver_cls))
        self.assertFalse(migration.install(self.module, type('D', (), {})))
