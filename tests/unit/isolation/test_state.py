"""The isolation state file as a record: ``state.from_json`` reads every
version of ``state.VERSIONS`` (one document of each, in each shape a
release wrote it: 1.0.0's own files, tests/data/release-1.0.0) and
``state.to_json`` writes what it read back unchanged."""

import copy
import json
import os

import testtools

from nova_pinning_hooks.isolation import state

RELEASE_1_0_0 = os.path.join(os.path.dirname(__file__), os.pardir,
                             os.pardir, 'data', 'release-1.0.0')


def _written_by_1_0_0(name):
    """A state file 1.0.0's own code wrote (tests/data/release-1.0.0)."""
    with open(os.path.join(RELEASE_1_0_0, name)) as f:
        return json.load(f)


# Version 1 as 1.0.0 wrote it (both backends) and as this release writes
# it (a boot id, the irqbalance retry under RETRY_KEY).
DOCUMENTS = {
    (1, '1.0.0, cgroup v1'): _written_by_1_0_0('isolation-v1.json'),
    (1, '1.0.0, systemd'): _written_by_1_0_0('isolation-systemd.json'),
    (1, 'this release'): {
        'version': 1, 'mode': 'systemd', 'cpus': '0-1', 'boot_id': 'b1',
        'systemd': {'slices': ['system.slice'],
                    'previous': {'system.slice': {'AllowedCPUs': ''}}},
        'moved': {}, 'one_to_one': '4-5',
        'interrupts': {'moved': {'24': {'original': '0-7', 'set': '0-3'}},
                       'refused': {'25': 'Input/output error'}},
        'workqueue': {'original': 'ff', 'set': '0f'},
        'irqbalance': {'pid': 700, 'start': 99, 'original': '',
                       'failed': '4-5'},
        state.RETRY_KEY: {'retry_at': 1764150030.0, 'retries': 1}},
}


class TestRecord(testtools.TestCase):

    def test_reads_every_version_it_accepts(self):
        self.assertEqual(set(state.VERSIONS),
                         {version for version, _ in DOCUMENTS})
        self.assertIn(state.VERSION, state.VERSIONS)
        for key, doc in DOCUMENTS.items():
            st = state.from_json(copy.deepcopy(doc), 'x')
            self.assertEqual((key[0], doc['mode'], doc['cpus']),
                             (st['version'], st['mode'], st.get('cpus')),
                             key)
            self.assertEqual(doc['moved'], st['moved'], key)
            self.assertEqual(doc, state.to_json(st), key)
        # The retry is held in the irqbalance record while it runs...
        st = state.from_json(copy.deepcopy(
            DOCUMENTS[(1, 'this release')]), 'x')
        self.assertEqual(
            {'pid': 700, 'start': 99, 'original': '', 'failed': '4-5',
             'retry_at': 1764150030.0, 'retries': 1}, st['irqbalance'])
        self.assertEqual('0-3', st['interrupts']['moved']['24']['set'])
        # ...and written back where 1.0.0 ignores it: the document read.
        self.assertEqual(DOCUMENTS[(1, 'this release')], state.to_json(st))

    def test_other_versions_are_refused(self):
        for version in (0, 2, True, '1', None):
            doc = dict(DOCUMENTS[(1, 'this release')], version=version)
            self.assertRaisesRegex(state.StateError,
                                   'x: not a version 1 isolation state',
                                   state.from_json, doc, 'x')

    def test_reads_what_versions_names(self):
        # from_json follows VERSIONS, not one version written in by hand:
        # a release that adds a version it reads adds it there alone.
        self.patch(state, 'VERSIONS', (1, 2))
        doc = dict(DOCUMENTS[(1, 'this release')], version=2)
        self.assertEqual(2, state.from_json(doc, 'x')['version'])
