"""benchmarks/fleet.py's ceiling (reference/performance.rst, "The
ceiling"): the most guest vCPUs any placement could have one-to-one,
from the binding policy alone. The engine itself, planning hosts of the
fleet's two shapes filled at random (arrivals and departures, up to
their VCPU inventory, ``tests/passmodel.py`` as in the model), never
binds more, and some of them reach it."""

import importlib.util
import os
import random

import testtools

BENCH = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                     'benchmarks')
spec = importlib.util.spec_from_file_location(
    'fleet', os.path.join(BENCH, 'fleet.py'))
fleet = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fleet)

SIZES = [size for size, _ in fleet.FLAVORS]


def filled(seed):
    """A host of either shape with guests arriving (and now and then
    one leaving) up to a random share of its VCPU inventory."""
    rnd = random.Random(seed)
    host = fleet.Host(0, rnd.choice(sorted(fleet.SHAPES)))
    target = rnd.uniform(0.5, fleet.RATIO) * host.pool
    for i in range(10 * int(target)):
        size = rnd.choice(SIZES)
        if host.vcpus_used + size > host.pool * fleet.RATIO:
            break
        host.arrive('g%d' % i, size, 0.0)
        if rnd.random() < 0.2:
            host.leave(rnd.choice(sorted(host.guests)))
        if host.vcpus_used >= target:
            break
    return host


class TestCeiling(testtools.TestCase):

    def test_the_formula(self):
        # within the pool: every vCPU; above it, 1 pCPU lost for each
        # 2 x ratio - 1 vCPUs over
        self.assertEqual(50, fleet.ceiling(50, 62))
        self.assertEqual(62, fleet.ceiling(62, 62))
        self.assertEqual(62 - 14 / 7, fleet.ceiling(76, 62, ratio=4.0))
        self.assertEqual(0.0, fleet.ceiling(1000, 62, ratio=4.0))

    def test_the_engine_never_binds_more(self):
        over = reached = 0
        for seed in range(120):
            host = filled(seed)
            used = host.vcpus_used
            bound = fleet.ceiling(used, host.pool)
            self.assertLessEqual(host.one_to_one, bound, 'seed %d: %d '
                                 'vCPUs on a pool of %d' % (
                                     seed, used, host.pool))
            over += used > host.pool
            reached += host.one_to_one == bound
        # hosts over their pool were tried, and the bound is no wider
        # than some of them reach (every vCPU of a host whose nodes
        # all have room)
        self.assertGreater(over, 60)
        self.assertGreater(reached, 5)
