"""Moving an arrived guest's memory home through the real libvirtd
(``host.memhome``): the home nodeset, then every node again, and again
at the next move. libvirt changes a running guest's nodeset only in
restrictive mode: a nodeset written without a mode made the guest
strict, and libvirt 9.0 refused the widening after it ("change of
nodeset for running domain requires restrictive numa mode"), leaving
the guest's ``cpuset.mems`` on its home node (issue 61). On this host's
node(s) the pages need not move; what libvirt accepts is the point. The
pages moving between two nodes: tests/vm/test_arrivals.py."""

import os

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import memhome
from nova_pinning_hooks.host import virt
from tests.functional import base

NODES = '/sys/devices/system/node/online'


class TestMemhome(base.FunctionalTestCase):

    def test_a_move_widens_again_and_the_next_move_works(self):
        dom = self.boot('memhome')
        with open(NODES) as f:
            every = cpuset.parse(f.read().strip())
        home = min(every)
        host = virt.connect(base.URI, virt.HostOptions(
            busy_retries=2, busy_retry_delay=0.1, set_home_node=False,
            libvirt_call_timeout=30.0, kernel_affinity=False))
        for attempt in (1, 2):
            outcome = memhome.move(host, dom.UUIDString(), home, 0, every,
                                   reserve_kib=0)
            self.assertEqual((memhome.Result.MOVED, True),
                             (outcome.result, outcome.widened),
                             (attempt, outcome))
            params = dom.numaParameters(self.libvirt.VIR_DOMAIN_AFFECT_LIVE)
            self.assertEqual(
                (self.libvirt.VIR_DOMAIN_NUMATUNE_MEM_RESTRICTIVE, every),
                (params['numa_mode'],
                 cpuset.parse(params['numa_nodeset'])), attempt)
        self.assertEqual(every, cpuset.parse(_mems_allowed(self.pid(dom))))


def _mems_allowed(pid):
    with open(os.path.join('/proc', str(pid), 'status')) as f:
        for line in f:
            if line.startswith('Mems_allowed_list:'):
                return line.split(':', 1)[1].strip()
    return ''
