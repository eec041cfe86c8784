"""The isolation state file as a record: ``state.from_json`` reads every
version of ``state.VERSIONS`` (one document of each, in each shape a
release wrote it) and ``state.to_json`` writes what it read back
unchanged."""

import copy

import testtools

from nova_pinning_hooks.isolation import state

# Version 1 as 1.0.0 wrote it (cgroup v1; no boot id, no irqbalance
# retry) and as this release writes it (systemd; the kernel's parts, the
# retry under RETRY_KEY).
DOCUMENTS = {
    (1, '1.0.0'): {
        'version': 1, 'mode': 'v1', 'cpus': '0',
        'v1': {'cpuset_root': '/sys/fs/cgroup/cpuset',
               'memory_root': '/sys/fs/cgroup/memory',
               'group': 'nova-pinning-host',
               'created': {'cpuset': True, 'memory': None},
               'previous': {}},
        'moved': {'812': {'comm': 'sshd', 'start': 1234, 'cpuset': '/',
                          'affinity': {'812': '0-3'}}}},
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
