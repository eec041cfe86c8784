"""The overcommit file on a filesystem read-only as a whole, as the
kernel makes one (issue 40, L-2; doc/source/reference/security.rst, "Who writes
what where").

An ext4 error remounts the state filesystem read-only: nova-compute
can neither rewrite its overcommit file nor set it aside as stale, and
refuses its passes; before this, every other reader (``rebind``, the
root agent, the exporter: ``passes.settings.load``; the isolation
agent: ``isolation.config.load``) used the old CPU sets
the file still held. Here a tmpfs, in a mount namespace of its own, is
remounted read-only (``mount -o remount,ro``: the superblock, as an
ext4 error does) and both readers refuse the file; a read-only bind
mount of a writable tmpfs (a reader's container given the state
directory ``:ro``) is read as before. Needs root and ``unshare``; no
libvirtd.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import testtools

from tests.functional import base

HELPER = r'''
import json, os, subprocess, sys
from oslo_config import cfg
from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import hostsettings
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.isolation import config as isolation_config
from nova_pinning_hooks.passes import settings

top, how = sys.argv[1], sys.argv[2]
state, view = os.path.join(top, 'state'), os.path.join(top, 'view')
subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m,mode=0755',
                'nph-readonly-test', state], check=True)
os.mkdir(os.path.join(state, 'nova'), 0o755)
path = os.path.join(state, 'nova', 'overcommit.json')
# What nova-compute wrote before it was restarted with other CPU sets.
overcommitfile.write(path, hostsettings.HostSettings(4.0, '', shared_cpus='0'))
if how == 'superblock':
    subprocess.run(['mount', '-o', 'remount,ro', state], check=True)
    read = path
else:
    subprocess.run(['mount', '--bind', state, view], check=True)
    subprocess.run(['mount', '-o', 'remount,bind,ro', view], check=True)
    read = os.path.join(view, 'nova', 'overcommit.json')
try:
    open(os.path.join(os.path.dirname(read), 'probe'), 'w')
    writable = True
except OSError:
    writable = False
conf = cfg.ConfigOpts()
conf_mod.register_opts(conf)
conf([], default_config_files=[])
conf.set_override('overcommit_file', read, group='nova_pinning')
conf.set_override('reserved_cpus', '1', group='nova_pinning')
out = {'writable': writable}
try:
    out['shared_cpus'] = settings.load(
        settings.read(conf).ratio).shared_cpus
except settings.SettingsError as exc:
    out['settings_error'] = str(exc)
try:
    # What the isolation agent checks before it confines anything (it
    # reads the host, changes nothing).
    isolation_config.load(isolation_config.read(conf))
    out['isolation'] = 'checked'
except isolation_config.ConfigError as exc:
    out['isolation_error'] = str(exc)
print(json.dumps(out))
'''


class TestReadOnlyStateFilesystem(testtools.TestCase):

    def setUp(self):
        super().setUp()
        missing = None
        if os.geteuid() != 0:
            missing = 'not root'
        elif shutil.which('unshare') is None:
            missing = 'unshare is not installed'
        base.require(self, missing)
        self.top = tempfile.mkdtemp(prefix='nph-readonly.')
        self.addCleanup(shutil.rmtree, self.top, True)
        for d in ('state', 'view'):
            os.mkdir(os.path.join(self.top, d))

    def readers(self, how):
        proc = subprocess.run(
            ['unshare', '-m', '--propagation', 'private', sys.executable,
             '-c', HELPER, self.top, how],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        return json.loads(proc.stdout)

    def test_a_filesystem_read_only_as_a_whole_is_refused_by_every_reader(
            self):
        out = self.readers('superblock')
        self.assertFalse(out['writable'])
        self.assertNotIn('shared_cpus', out, 'the old CPU sets were used')
        self.assertIn('is on a read-only filesystem', out['settings_error'])
        self.assertIn('is on a read-only filesystem',
                      out.get('isolation_error', ''), out)

    def test_a_read_only_mount_of_a_writable_filesystem_is_read(self):
        out = self.readers('bind')
        self.assertFalse(out['writable'])
        self.assertEqual('0', out.get('shared_cpus'), out)
        self.assertEqual('checked', out.get('isolation'), out)
