"""A member's image with ``hw_numa_nodes=1``: nova gives the member's
shared-policy guest an instance NUMA topology and pins it itself, over
the shared CPUs. The package leaves that guest to nova, and must count it
(issue 34, R2): its vCPUs are load on the CPUs they float over, never CPUs
taken out of the pool.

* nph-compute1 (no CPU sets): the member's 2-vCPU guest floats over CPUs
  0-1, so two managed 1-vCPU guests beside it cannot be one-to-one there
  (before: each "one-to-one / ok" on a CPU the member's guest also ran
  on, 4 vCPUs on 2 CPUs shown as one-to-one);
* nph-compute2 (``cpu_shared_set = 0``): nova pins the member's 1-vCPU
  guest to CPU 0, which stays in the pool: a managed guest beside it is
  bound there (before: the pool emptied, every managed guest "untouched:
  empty-pool").
"""

import os
import tempfile
import time

from tests.cloud import base
from tests.cloud import test_lifecycle


class TestNovaPlacedSharedGuests(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if base.package_state() != 'on':
            base.cloud('package', 'on')

    def members_numa_image(self):
        """The cloud's image again, uploaded by the member with
        ``hw_numa_nodes=1``, as any member can."""
        data = self.admin.image.download_image(self.ids['image']).content
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'numa.raw')
            with open(path, 'wb') as f:
                f.write(data)
            image = self.member.image.create_image(
                name=base.PREFIX + 'numa', filename=path, disk_format='raw',
                container_format='bare', wait=True, hw_numa_nodes='1')
        self.addCleanup(self.member.image.delete_image, image)
        return image

    def boot_from(self, image, name, flavor, host):
        server = self.admin.compute.create_server(
            name=base.PREFIX + name, image_id=image.id,
            flavor_id=self.flavor(flavor), networks='none',
            availability_zone='nova:' + host)
        return self.wait_status(server, 'ACTIVE')

    def managed(self, host, servers):
        """{server id: its guest in ``nova-pinning status``}."""
        names = {self.get(s).instance_name: s.id for s in servers}
        status = test_lifecycle.status_json(host)
        return {names[g['name']]: g for g in status['guests']
                if g['name'] in names}, status

    @staticmethod
    def settled(view, guests1, guests2, a, b, c):
        return (all(view.get(s.id, (0, 0, {}))[2] == {0: frozenset({0, 1})}
                    for s in (a, b)) and
                all(guests1.get(s.id, {}).get('mode') == 'node-range'
                    for s in (a, b)) and
                guests2.get(c.id, {}).get('mode') not in (None, 'untouched'))

    def test_a_members_numa_image_is_counted_not_a_dedicated_cpu(self):
        image = self.members_numa_image()
        numa1 = self.boot_from(image, 'numa1', 'nph.2', 'nph-compute1')
        numa2 = self.boot_from(image, 'numa2', 'nph.1', 'nph-compute2')
        a = self.boot('m1', host='nph-compute1')
        b = self.boot('m2', host='nph-compute1')
        c = self.boot('m3', host='nph-compute2')
        for s in (numa1, numa2, a, b, c):
            self.assert_no_fault(s)
        # nova placed the member's guests itself (its pins in the XML).
        for s, host in ((numa1, 'nph-compute1'), (numa2, 'nph-compute2')):
            xml = test_lifecycle.domain_xml(host, self.get(s).instance_name)
            self.assertIn('<numa>', xml)
            self.assertIn('<vcpupin', xml)
        deadline = time.monotonic() + base.PASS_WAIT
        while True:  # passes run after nova's operations return
            view = self.kernel_view()
            guests1, _ = self.managed('nph-compute1', (a, b))
            guests2, status2 = self.managed('nph-compute2', (c,))
            seen = (view, guests1, guests2)
            if self.settled(view, guests1, guests2, a, b, c) or \
                    time.monotonic() > deadline:
                break
            time.sleep(1)
        # (a) nph-compute1: both managed guests on the node's whole pool,
        # none "one-to-one" on a CPU the member's guest floats over.
        for s in (a, b):
            self.assertEqual({0: frozenset({0, 1})}, view[s.id][2], seen)
            self.assertEqual('node-range', guests1[s.id]['mode'], seen)
        # (b) nph-compute2: nova's pin of the member's guest left CPU 0 in
        # the pool; the managed guest is bound there, not untouched.
        self.assertEqual('0', status2['pool'], status2)
        self.assertNotEqual('untouched', guests2[c.id]['mode'], status2)
        self.assertEqual({0: frozenset({0})}, view[c.id][2], seen)
        self.assert_no_compute_error()
