"""The overcommit file on a filesystem read-only as a whole (issue 40,
L-2): how a mount's super options are read. The kernel's own answer, a
tmpfs remounted read-only and a read-only bind mount of a writable one,
is tests/functional/test_readonly_state.py."""

import os
import tempfile

import testtools

from nova_pinning_hooks.host import overcommitfile

# /proc/self/mountinfo as Linux 6.1 writes it: mount id, parent, dev,
# root, mount point, mount options, optional fields, "-", type, source,
# super options.
MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
35 22 0:31 / /var/lib/nph rw,relatime - ext4 /dev/vdb ro,errors=remount-ro
36 22 0:32 / /srv/state ro,relatime - tmpfs tmpfs rw,size=4096k
37 22 0:33 / /srv/plain ro,relatime shared:3 master:2 - xfs /dev/vdc ro
38 22 0:34 / /srv/odd\\040name rw - tmpfs tmpfs rw
"""


class TestSuperblock(testtools.TestCase):

    def test_the_super_options_decide(self):
        ro = overcommitfile.superblock_read_only
        self.assertFalse(ro(MOUNTINFO, 22))
        # ext4 remounted read-only after an error: the mount still says
        # rw, the superblock ro.
        self.assertTrue(ro(MOUNTINFO, 35))
        # A read-only bind mount of a writable filesystem: not read-only
        # as a whole (a reader's container given the directory :ro).
        self.assertFalse(ro(MOUNTINFO, 36))
        self.assertTrue(ro(MOUNTINFO, 37))
        self.assertFalse(ro(MOUNTINFO, 38))

    def test_unknown_counts_as_read_only(self):
        self.assertTrue(overcommitfile.superblock_read_only(MOUNTINFO, 99))
        self.assertTrue(overcommitfile.superblock_read_only(
            '40 22 0:35 / /x rw\n', 40))

    def test_a_writable_filesystem_reads_as_before(self):
        with tempfile.TemporaryDirectory() as top:
            path = os.path.join(top, 'overcommit.json')
            overcommitfile.write(path, {
                'version': 1, 'allocation_ratio': 2.0, 'shared_cpus': '1',
                'dedicated_cpus': None})
            self.assertEqual('1', overcommitfile.read(path).shared_cpus)
