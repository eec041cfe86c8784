"""Make this directory's files with the 1.0.0 release's own code.

Run from a tree of the release (its tests import its fakes) with the
release installed (README.rst here says how)::

    NPH_TEST_INSTALLED=1 NPH_FIXTURE_OUT=DIR python make.py

Each test below drives 1.0.0's code as its own unit tests do (the fake
host of tests/unit/isolation, its fake systemctl, its fake libvirt) and
copies the file that code wrote into ``NPH_FIXTURE_OUT``.
"""

import os
import shutil
import sys
import types
import unittest

sys.path.insert(0, os.getcwd())  # the 1.0.0 tree: its tests package

from oslo_config import cfg  # noqa: E402

from nova_pinning_hooks import conf as conf_mod  # noqa: E402
from nova_pinning_hooks.passes import overcommit  # noqa: E402
from tests.fixtures import FakeLibvirtFixture  # noqa: E402
from tests.unit import hosts  # noqa: E402
from tests.unit.isolation import test_pins  # noqa: E402
from tests.unit.isolation import test_systemd  # noqa: E402
from tests.unit.nova.test_activation import nova_like_conf  # noqa: E402

OUT = os.environ['NPH_FIXTURE_OUT']


def keep(path, name):
    if os.path.dirname(path) != OUT:
        shutil.copyfile(path, os.path.join(OUT, name))
    with open(path) as f:
        print('%s: %s' % (name, f.read()[:200].replace('\n', ' ')))


class TestOvercommit(unittest.TestCase):

    def nova_conf(self, shared, dedicated, ratio):
        return types.SimpleNamespace(
            cpu_allocation_ratio=ratio, initial_cpu_allocation_ratio=4.0,
            vcpu_pin_set=None, host='compute-1',
            compute=types.SimpleNamespace(cpu_shared_set=shared,
                                          cpu_dedicated_set=dedicated))

    def test_from_nova_conf(self):
        path = os.path.join(OUT, 'overcommit.json')
        overcommit.write(path, overcommit.from_nova_conf(
            self.nova_conf('2-7', None, 4.0)))
        keep(path, 'overcommit.json')

    def test_from_placement(self):
        path = os.path.join(OUT, 'overcommit-placement.json')
        overcommit.write(path, overcommit.from_nova_conf(
            self.nova_conf('2-5', '6-7', None), ratio=16.0))
        keep(path, 'overcommit-placement.json')


class TestIsolationV1(test_pins.PinsCase):
    """cgroup v1, with interrupts, the workqueue mask and irqbalance
    moved off a one-to-one guest's CPUs (test_pins' fake host)."""

    def test_apply(self):
        self.host.irqbalance(banned='1')
        self.one_to_one_guest()
        self.isolator().apply()
        keep(self.state_file, 'isolation-v1.json')


class TestIsolationSystemd(test_systemd.SystemdTestCase):

    def test_apply(self):
        self.isolator().apply()
        keep(self.state_file, 'isolation-systemd.json')


class TestTextfile(unittest.TestCase):
    """``nova-pinning agent``'s textfile after three passes, one guest
    on the fake libvirt (test_metrics' TestTextfileInTheAgent)."""

    def test_agent(self):
        import fixtures
        import testtools

        from nova_pinning_hooks.agent import service

        class Case(testtools.TestCase):
            def test(inner):
                fake = inner.useFixture(
                    FakeLibvirtFixture(hosts.load('small-1node'))).host
                fake.add_domain('g', 2, xml=hosts.domain_xml('g', 2))
                path = os.path.join(
                    inner.useFixture(fixtures.TempDir()).path,
                    'nova_pinning.prom')
                conf = nova_like_conf(inner, metrics_textfile=path,
                                      allocation_ratio=4.0)
                svc = service.BindingService(conf, events=False)
                inner.addCleanup(svc.stop)
                svc.start()
                for i in range(3):
                    assert svc.coalescer.request('t%d' % i, wait=True,
                                                 timeout=30)
                keep(path, 'nova_pinning.prom')
        result = unittest.TestResult()
        Case('test').run(result)
        self.assertEqual([], result.errors + result.failures)


if __name__ == '__main__':
    assert cfg and conf_mod  # imported for the 1.0.0 tree's side effects
    unittest.main(argv=[sys.argv[0], '-v'])
