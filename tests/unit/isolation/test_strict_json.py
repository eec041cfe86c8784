"""The state files that read JSON with ``strict.loads_json`` (tested in
tests/unit/engine/test_strict.py) refuse what it refuses."""

import os

import fixtures
import testtools

from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.isolation import state


class TestStateFiles(testtools.TestCase):
    """The overcommit file and the isolation state refuse the same."""

    def test_each(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(tmp, 'f.json')
        for text in ('{"version": 1, "version": 1, "allocation_ratio": 4}',
                     '{"version": 1, "allocation_ratio": NaN}',
                     '{"version": 1, "x": ' + '[' * 50 + ']' * 50 + '}'):
            with open(path, 'w') as f:
                f.write(text)
            os.chmod(path, 0o600)
            self.assertRaises(overcommitfile.OvercommitError,
                              overcommitfile.read, path)
            self.assertRaises(state.StateError, state.load, path)
