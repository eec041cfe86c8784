"""The overcommit file on a filesystem read-only as a whole (issue 40,
L-2): how a mount's super options are read. The kernel's own answer, a
tmpfs remounted read-only and a read-only bind mount of a writable one,
is tests/functional/test_readonly_state.py."""

import os
import tempfile

import testtools

from nova_pinning_hooks.engine.hostsettings import HostSettings
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
            overcommitfile.write(path, HostSettings(
                2.0, '', shared_cpus='1'))
            self.assertEqual('1', overcommitfile.read(path).shared_cpus)


class TestContent(testtools.TestCase):
    """The file's JSON: what is written is what is read back, and every
    shape of version 1 this release has written is read."""

    def test_round_trip(self):
        c = HostSettings(2.5, 'placement', shared_cpus='0-3',
                         dedicated_cpus='4-7', host='h',
                         written_at='2026-01-01T00:00:00+00:00')
        self.assertEqual(c, overcommitfile.from_json(
            overcommitfile.to_json(c), 'f'))
        self.assertEqual(1, overcommitfile.to_json(c)['version'])

    def test_every_shape_of_version_1(self):
        for data, want in [
                # 1.0.0: no host, no written_at, no ratio_source
                ({'version': 1, 'allocation_ratio': 4,
                  'shared_cpus': None, 'dedicated_cpus': None},
                 HostSettings(4.0, '', written_at='', host='')),
                ({'version': 1, 'allocation_ratio': 2.0, 'host': 'h',
                  'written_at': 'w', 'ratio_source': 'placement',
                  'shared_cpus': '1', 'dedicated_cpus': '2'},
                 HostSettings(2.0, 'placement', shared_cpus='1',
                              dedicated_cpus='2', written_at='w',
                              host='h')),
        ]:
            self.assertEqual(want, overcommitfile.from_json(data, 'f'))

    def test_the_same_binding(self):
        a = HostSettings(4.0, 'placement', shared_cpus='0-3')
        self.assertEqual(a.binding(), HostSettings(
            4, 'other', shared_cpus='0,1,2,3', host='g').binding())
        self.assertNotEqual(a.binding(), HostSettings(
            4.0, 'placement', shared_cpus='0-2').binding())
