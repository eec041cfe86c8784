"""The status the isolation agent publishes after every sweep, which the
metrics and nova-compute read instead of asking systemd (issue 40, M-1).
"""

import json
import os
import stat
import threading
import time

import fixtures

from nova_pinning_hooks.isolation import report
from nova_pinning_hooks.isolation import statusfile
from tests.unit.isolation import base
from tests.unit.isolation import fakehost


class StatusCase(base.TestCase):

    def setUp(self):
        super().setUp()
        self.host.typical()
        self.status_path = os.path.join(self.host.top, 'state',
                                        'isolation.status.json')

    def published(self):
        return report.published(self.options(), self.host.paths)

    def write(self, **doc):
        """A status document as the agent writes it, with ``doc``'s
        fields instead."""
        content = {'version': 1, 'written': time.time(),
                   'boottime': time.clock_gettime(time.CLOCK_BOOTTIME),
                   'boot_id': None, 'sweep_interval': 30, 'pid': 1,
                   'status': {'state': 'applied', 'mode': 'v1',
                              'confined': 3, 'not_confined': 0}}
        content.update(doc)
        os.makedirs(os.path.dirname(self.status_path), exist_ok=True)
        with open(self.status_path, 'w') as f:
            json.dump(content, f)
        os.chmod(self.status_path, 0o644)


class TestPublished(StatusCase):

    def test_apply_publishes_it_beside_the_state_0644_whatever_the_umask(self):
        for umask in (0o077, 0o000):
            old = os.umask(umask)
            try:
                self.isolator().apply()
            finally:
                os.umask(old)
            st = os.stat(self.status_path)
            self.assertEqual(0o644, stat.S_IMODE(st.st_mode), oct(umask))
            self.assertEqual(os.geteuid(), st.st_uid)
        self.assertEqual(self.status_path,
                         statusfile.path_for(self.state_file))
        self.assertEqual([], [n for n in os.listdir(
            os.path.dirname(self.state_file)) if n.endswith('.tmp')])
        with open(self.status_path) as f:
            doc = json.load(f)
        self.assertEqual((1, 30, os.getpid()), (doc['version'],
                                                doc['sweep_interval'],
                                                doc['pid']))
        live = report.status(self.options(), self.host.paths)
        for key in ('state', 'mode', 'reserved_cpus', 'confined',
                    'not_confined', 'recorded_processes', 'group_cpus'):
            self.assertEqual(live[key], doc['status'][key], key)
        got = self.published()
        self.assertEqual(('applied', 3, False),
                         (got['state'], got['confined'],
                          got['status_stale']))
        self.assertLess(got['status_age'], 30)

    def test_written_atomically_never_through_a_link(self):
        # A link planted where the status goes is replaced, not written
        # through: the file is renamed into place.
        victim = os.path.join(self.host.top, 'victim')
        with open(victim, 'w') as f:
            f.write('untouched\n')
        os.makedirs(os.path.dirname(self.status_path))
        os.symlink(victim, self.status_path)
        self.isolator().apply()
        self.assertFalse(os.path.islink(self.status_path))
        self.assertTrue(stat.S_ISREG(os.lstat(self.status_path).st_mode))
        with open(victim) as f:
            self.assertEqual('untouched\n', f.read())
        # Written whole or not at all: readers never see a part.
        stop, seen = threading.Event(), []

        def read():
            while not stop.is_set():
                try:
                    with open(self.status_path) as f:
                        seen.append(json.load(f)['version'])
                except FileNotFoundError:
                    seen.append('missing')
        reader = threading.Thread(target=read)
        reader.start()
        try:
            iso = self.isolator()
            for _ in range(20):
                iso.apply()
        finally:
            stop.set()
            reader.join(10)
        self.assertEqual({1}, set(seen))

    def test_republished_at_every_sweep_of_watch(self):
        self.config(sweep_interval=1)
        iso = self.isolator()
        stop = threading.Event()
        thread = threading.Thread(target=iso.watch, args=(stop, 30))
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(stop.set)
        written = set()
        end = time.monotonic() + 15
        while len(written) < 3 and time.monotonic() < end:
            try:
                with open(self.status_path) as f:
                    written.add(json.load(f)['written'])
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.1)
        self.assertGreaterEqual(len(written), 3)

    def test_undo_removes_it(self):
        self.isolator().apply()
        self.assertTrue(os.path.exists(self.status_path))
        self.assertEqual((), self.undo().failures)
        self.assertFalse(os.path.exists(self.status_path))
        self.assertEqual('not applied', self.published()['state'])


class TestRead(StatusCase):

    def test_none_published(self):
        got = self.published()
        self.assertEqual(('not applied', 0, False),
                         (got['state'], got['status_written'],
                          got['status_stale']))
        self.assertIn('no status from the isolation agent', got['why'])

    def test_stale_after_three_sweeps(self):
        now = 100000.0  # CLOCK_BOOTTIME seconds, as read() is told
        for age, stale in ((10, False), (89, False), (91, True),
                           (3600, True)):
            self.write(boottime=now - age, written=time.time() - age,
                       boot_id='b1')
            got = statusfile.read(self.state_file, self.boot('b1'), now=now)
            self.assertEqual((stale, age), (got['status_stale'],
                                            got['status_age']), age)
            self.assertEqual(3, got['confined'])
            self.assertEqual(30, got['status_sweep_interval'])

    def test_age_by_the_boot_clock_not_the_wall_clock(self):
        # Written 10 s ago by the boot clock, the wall clock stepped
        # back a day since: fresh.
        now = 100000.0
        self.write(boottime=now - 10, written=time.time() + 86400,
                   boot_id='b1')
        got = statusfile.read(self.state_file, self.boot('b1'), now=now)
        self.assertEqual((False, 10), (got['status_stale'],
                                       got['status_age']))
        # Without the boot id, the wall clock: an hour is stale.
        self.write(boottime=None, written=time.time() - 3600)
        got = statusfile.read(self.state_file, self.host.paths.proc)
        self.assertTrue(got['status_stale'])

    def boot(self, boot_id):
        path = os.path.join(self.host.paths.proc, 'sys', 'kernel', 'random',
                            'boot_id')
        fakehost.put(path, boot_id + '\n')
        return self.host.paths.proc

    def test_from_an_earlier_boot_nothing_is_applied(self):
        self.write(boot_id='b1')
        got = statusfile.read(self.state_file, self.boot('b2'))
        self.assertEqual(('not applied', True, True),
                         (got['state'], got['earlier_boot'],
                          got['status_stale']))
        self.assertNotIn('confined', got)

    def test_what_cannot_be_trusted_is_unknown(self):
        cases = [
            ('group-writable', lambda: os.chmod(self.status_path, 0o664)),
            ('a link', lambda: (os.replace(self.status_path,
                                           self.status_path + '.x'),
                                os.symlink(self.status_path + '.x',
                                           self.status_path))),
        ]
        for why, spoil in cases:
            self.write()
            spoil()
            got = self.published()
            self.assertEqual(('unknown', True),
                             (got['state'], got['status_stale']), why)
            self.assertNotIn('confined', got, why)
            os.unlink(self.status_path)
        # A FIFO is refused at once, never waited on.
        os.mkfifo(self.status_path)
        start = time.monotonic()
        self.assertEqual('unknown', self.published()['state'])
        self.assertLess(time.monotonic() - start, 2)
        os.unlink(self.status_path)
        for bad in ({'version': True}, {'version': 2}, {'written': 'now'},
                    {'written': -1}, {'sweep_interval': 0},
                    {'sweep_interval': 1.5}, {'status': []},
                    {'status': {'confined': 3}},
                    {'status': {'state': 'applied', 'x': [1]}},
                    {'status': {'state': 'applied',
                                'a': {'b': {'c': {'d': 1}}}}},
                    {'boot_id': 7}, {'pid': 'me'},
                    # Each field of the status of the type Status
                    # declares (issue 60: a float count raised out of
                    # the metrics).
                    {'status': {'state': 'applied', 'confined': 1.5}},
                    {'status': {'state': 'applied', 'confined': True}},
                    {'status': {'state': 'applied', 'kept': {'x': 1.0}}},
                    {'status': {'state': 'applied', 'slices': {'a': 'b'}}},
                    {'status': {'state': 'applied',
                                'irqbalance': {'pid': 'x', 'told': None}}},
                    {'status': {'state': 'applied',
                                'irqbalance': {'told': '0'}}},
                    {'status': {'state': 'applied',
                                'agent': {'state': 1}}}):
            self.write(**bad)
            got = self.published()
            self.assertEqual('unknown', got['state'], bad)
            self.assertIn(self.status_path, got['error'], bad)
        with open(self.status_path, 'w') as f:
            f.write('{"version": 1, "version": 1}')
        self.assertEqual('unknown', self.published()['state'])

    # One document of each version ``statusfile.from_json`` reads, as
    # that version's agent wrote it.
    DOCUMENTS = {
        1: {'version': 1, 'written': 1764150000.5, 'boottime': 5123.4,
            'boot_id': 'b1', 'sweep_interval': 30, 'pid': 812,
            'status': {'state': 'applied', 'mode': 'v1', 'confined': 3,
                       'not_confined': 0,
                       'slices': {'machine.slice': {'cpus': '0-1'}}}},
    }

    def test_reads_every_version_it_accepts(self):
        self.assertEqual(set(statusfile.VERSIONS), set(self.DOCUMENTS))
        self.assertIn(statusfile.VERSION, statusfile.VERSIONS)
        for version, doc in self.DOCUMENTS.items():
            p = statusfile.from_json(doc, 'x')
            self.assertEqual((1764150000.5, 30, 'b1', 812, 5123.4),
                             (p.written, p.sweep_interval, p.boot_id, p.pid,
                              p.boottime), version)
            self.assertEqual(doc['status'], p.status, version)
        # This release writes its own version, read back unchanged.
        p = statusfile.from_json(self.DOCUMENTS[statusfile.VERSION], 'x')
        self.assertEqual(self.DOCUMENTS[statusfile.VERSION],
                         statusfile.to_json(p))
        self.assertRaisesRegex(ValueError, 'x: not a version 1 isolation',
                               statusfile.from_json,
                               dict(self.DOCUMENTS[1], version=2), 'x')

    def test_never_raises(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.isolation.statusfile.read',
            lambda *a, **kw: 1 / 0))
        got = self.published()
        self.assertEqual('unknown', got['state'])
        self.assertIn('ZeroDivisionError', got['error'])
