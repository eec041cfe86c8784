"""The overcommit file: atomic writes, strict reads."""

import json
import os
import stat
from unittest import mock

import fixtures
import testtools

from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.nova import ratiofile


def nova_conf(ratio=None, initial=4.0, shared=None, dedicated=None,
              pin_set=None):
    conf = mock.Mock(cpu_allocation_ratio=ratio,
                     initial_cpu_allocation_ratio=initial,
                     reserved_host_cpus=0, vcpu_pin_set=pin_set,
                     host='compute-1')
    conf.compute.cpu_shared_set = shared
    conf.compute.cpu_dedicated_set = dedicated
    return conf


class TestRatio(testtools.TestCase):

    def test_effective_ratio(self):
        self.assertEqual((16.0, 'cpu_allocation_ratio'),
                         ratiofile.effective_ratio(16.0, 4.0))
        for unset in (None, 0.0):
            self.assertEqual((4.0, 'initial_cpu_allocation_ratio'),
                             ratiofile.effective_ratio(unset, 4.0))

    def test_from_nova_conf(self):
        c = ratiofile.from_nova_conf(nova_conf(shared='2-7',
                                                dedicated='8-15'))
        self.assertEqual((4.0, '2-7', '8-15', 'compute-1'),
                         (c.allocation_ratio, c.shared_cpus,
                          c.dedicated_cpus, c.host))

    def test_legacy_vcpu_pin_set_is_the_shared_set(self):
        c = ratiofile.from_nova_conf(nova_conf(pin_set='4-11'))
        self.assertEqual('4-11', c.shared_cpus)


class TestFile(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                'state')
        self.path = os.path.join(self.dir, 'overcommit.json')

    def test_round_trip_and_modes(self):
        overcommitfile.write(self.path, ratiofile.from_nova_conf(
            nova_conf(ratio=2.5, shared='0-3')))
        info = overcommitfile.read(self.path)
        self.assertEqual((2.5, '0-3', None),
                         (info.allocation_ratio, info.shared_cpus,
                          info.dedicated_cpus))
        self.assertEqual(0o644, stat.S_IMODE(os.stat(self.path).st_mode))
        self.assertFalse(os.stat(self.dir).st_mode & stat.S_IWOTH)
        self.assertEqual(['overcommit.json'], os.listdir(self.dir))

    def test_replace_is_atomic(self):
        overcommitfile.write(self.path, ratiofile.from_nova_conf(nova_conf()))
        inode = os.stat(self.path).st_ino
        overcommitfile.write(self.path, ratiofile.from_nova_conf(
            nova_conf(ratio=8.0)))
        self.assertNotEqual(inode, os.stat(self.path).st_ino)  # renamed
        self.assertEqual(8.0, overcommitfile.read(self.path).allocation_ratio)

    def test_failed_write_leaves_old_file_and_no_temp(self):
        overcommitfile.write(self.path, ratiofile.from_nova_conf(nova_conf()))
        with mock.patch('os.write', side_effect=OSError('disk full')):
            self.assertRaises(OSError, overcommitfile.write, self.path,
                              ratiofile.from_nova_conf(nova_conf(ratio=9)))
        self.assertEqual(4.0, overcommitfile.read(self.path).allocation_ratio)
        self.assertEqual(['overcommit.json'], os.listdir(self.dir))

    def test_refuses_to_write_a_bad_ratio(self):
        content = ratiofile.from_nova_conf(nova_conf(initial=0.0))
        self.assertRaises(overcommitfile.OvercommitError, overcommitfile.write,
                          self.path, content)
        self.assertFalse(os.path.exists(self.path))

    def test_bad_files(self):
        good = overcommitfile.to_json(ratiofile.from_nova_conf(nova_conf()))
        cases = [
            ('missing', None, 'does not exist'),
            ('not json', '{"version": 1', 'corrupt'),
            ('not an object', '[1]', 'not a JSON object'),
            ('version', dict(good, version=7), 'unknown version'),
            ('zero', dict(good, allocation_ratio=0), 'number > 0'),
            ('negative', dict(good, allocation_ratio=-2), 'number > 0'),
            ('string', dict(good, allocation_ratio='4'), 'number > 0'),
            ('bool', dict(good, allocation_ratio=True), 'number > 0'),
            ('cpu set', dict(good, shared_cpus='1-x'), 'shared_cpus'),
        ]
        for label, content, fragment in cases:
            if os.path.exists(self.path):
                os.unlink(self.path)
            if content is not None:
                os.makedirs(self.dir, exist_ok=True)
                with open(self.path, 'w') as f:
                    f.write(content if isinstance(content, str)
                            else json.dumps(content))
            exc = self.assertRaises(overcommitfile.OvercommitError,
                                    overcommitfile.read, self.path)
            self.assertIn(fragment, str(exc), label)
            self.assertIn(self.path, str(exc), label)

    def test_unreadable(self):
        os.makedirs(self.path)  # a directory where the file should be
        exc = self.assertRaises(overcommitfile.OvercommitError,
                                overcommitfile.read, self.path)
        self.assertIn('cannot be read', str(exc))
