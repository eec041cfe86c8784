"""``nova-pinning-status upgrade check`` beside the real nova from PyPI
(tox -e nova-N, each release of tools/nova-releases): its child Python
imports nova's libvirt driver and finds every part the package wraps."""

import json
import os
import subprocess
import sys
from importlib import metadata

import fixtures
import testtools

from tests import nova_releases

CONF = """[oslo_messaging_notifications]
driver = messagingv2
driver = nova_pinning
[nova_pinning]
# libvirt's own test driver, in-process: no daemon is asked.
connection_uri = test:///default
overcommit_file = {tmp}/overcommit.json
allocation_ratio = 4.0
[nova_pinning_isolation]
state_file = {tmp}/isolation.json
"""


class TestUpgradeCheck(testtools.TestCase):

    def test_this_nova_has_every_part(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'nova.conf')
        with open(path, 'w') as f:
            f.write(CONF.format(tmp=tmp))
        proc = subprocess.run(
            [sys.executable, '-m', 'nova_pinning_hooks.cmd.status',
             '--config-file', path, 'upgrade', 'check', '--json'],
            capture_output=True, text=True, timeout=300, cwd='/')
        self.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
        checks = {c['check']: c for c in json.loads(proc.stdout)['checks']}
        nova = metadata.version('nova')
        self.assertEqual(
            'nova %s has every part the package wraps (tested: nova %d '
            'to %d)' % (nova, nova_releases.oldest().series,
                        nova_releases.newest().series),
            checks['nova']['details'])
        self.assertEqual(0, checks['nova']['result'])
