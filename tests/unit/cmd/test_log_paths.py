"""issue 48, R5-M2: the commands root runs log to stderr, whatever the
configuration files' log options say.

The docs tell root to run ``nova-pinning-status --config-file
/etc/nova/nova.conf upgrade check`` and ``nova-pinning --config-file
/etc/nova/nova.conf status``; nova.conf commonly sets ``log_dir`` to a
directory the nova user owns. Before, oslo.log opened
``<log_dir>/<prog>.log`` there (``O_APPEND|O_CREAT``, following links):
a link the nova user planted made root create or append to any file.
Each test plants such links and runs every command root runs; the
files the links name must never appear.
"""

import io
import logging
import os
import pwd

import fixtures
import testtools

from nova_pinning_hooks.cmd import common
from nova_pinning_hooks.cmd import isolate
from nova_pinning_hooks.cmd import pinning
from nova_pinning_hooks.cmd import status
from tests.unit.host.test_safefs import Alarm

EXAMPLE = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'etc',
                       'examples', 'intel-2s-28c-ht.snapshot.json')
COMMANDS = [
    (pinning.main, 'nova-pinning', ['plan', '--snapshot', EXAMPLE]),
    (isolate.main, 'nova-pinning-isolate', ['status']),
    (isolate.main, 'nova-pinning-isolate', ['undo']),
    (status.main, 'nova-pinning-status', ['upgrade', 'check']),
]


class TestLogPathsFromTheConfiguration(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(Alarm(120))
        top = self.useFixture(fixtures.TempDir()).path
        # A root-only directory, and a log directory another user owns
        # (nobody, when the tests run as root), full of links into it.
        self.secret = os.path.join(top, 'secret')
        os.mkdir(self.secret, 0o700)
        self.logs = os.path.join(top, 'logs')
        os.mkdir(self.logs, 0o755)
        names = {prog for _, prog, _ in COMMANDS} | {'chosen'}
        for name in names:
            os.symlink(os.path.join(self.secret, name + '.log'),
                       os.path.join(self.logs, name + '.log'))
        if os.geteuid() == 0:
            nobody = pwd.getpwnam('nobody')
            for path in [self.logs] + [os.path.join(self.logs, n + '.log')
                                       for n in names]:
                os.lchown(path, nobody.pw_uid, nobody.pw_gid)
        self.links = sorted(n + '.log' for n in names)
        # A logging configuration that writes a file of its own.
        self.ini = os.path.join(top, 'logging.ini')
        with open(self.ini, 'w') as f:
            f.write('[loggers]\nkeys=root\n[handlers]\nkeys=file\n'
                    '[formatters]\nkeys=\n[logger_root]\nlevel=DEBUG\n'
                    'handlers=file\n[handler_file]\nclass=FileHandler\n'
                    'args=(%r, "a")\n' % os.path.join(self.logs,
                                                      'chosen.log'))
        self.top = top
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        self.addCleanup(self._restore, handlers, level)

    @staticmethod
    def _restore(handlers, level):
        root = logging.getLogger()
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)

    def run_each(self, default_section):
        state = os.path.join(self.top, 'state', 'iso.json')
        cfgfile = os.path.join(self.top, 'nova.conf')
        with open(cfgfile, 'w') as f:
            f.write('[DEFAULT]\n%s[nova_pinning_isolation]\nstate_file = '
                    '%s\ninterrupt_sample_seconds = 0\n'
                    % (default_section, state))
        ran = []
        for main, prog, argv in COMMANDS:
            out, err = io.StringIO(), io.StringIO()
            with fixtures.MonkeyPatch('sys.stdout', out), \
                    fixtures.MonkeyPatch('sys.stderr', err):
                code = main(['--config-file', cfgfile] + argv)
            ran.append((prog, argv[0], code))
            self.assertEqual([], os.listdir(self.secret),
                             (prog, argv, code, err.getvalue()[-500:]))
            self.assertEqual(self.links, sorted(os.listdir(self.logs)))
        # Each command got as far as its work (not refused at parse).
        self.assertNotIn(2, [code for _, sub, code in ran
                             if sub != 'upgrade'], ran)

    def test_log_dir(self):
        self.run_each('log_dir = %s\n' % self.logs)

    def test_log_file(self):
        self.run_each('log_file = %s\n' % os.path.join(self.logs,
                                                       'chosen.log'))

    def test_log_config_append(self):
        self.run_each('log_config_append = %s\n' % self.ini)

    def test_watch_log_file_and_syslog(self):
        self.run_each('log_dir = %s\nwatch_log_file = true\n'
                      'use_syslog = true\n' % self.logs)

    def test_nova_computes_pass_worker_logs_where_nova_says(self):
        # Not root: the nova user's own log, as nova-compute's.
        conf = common.new_conf()
        conf([], project='x')
        conf.set_override('log_dir', self.logs)
        self.useFixture(fixtures.MonkeyPatch('os.geteuid', lambda: 1000))
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_log.log.setup', lambda conf, prog: None))
        common.setup_logging(conf, 'nova-pinning', nova_worker=True)
        self.assertEqual(self.logs, conf.log_dir)
        # As root too: nova-compute runs it as its own user, which writes
        # the same files (tests/nova reads its pass lines there).
        self.useFixture(fixtures.MonkeyPatch('os.geteuid', lambda: 0))
        common.setup_logging(conf, 'nova-pinning', nova_worker=True)
        self.assertEqual(self.logs, conf.log_dir)
        # A command run by hand, as root, never does.
        common.setup_logging(conf, 'nova-pinning')
        self.assertIsNone(conf.log_dir)
