"""Records held from activation until nova has set up logging."""

import logging
import time

from unittest import mock

import fixtures
import testtools

from nova_pinning_hooks.nova import activation
from nova_pinning_hooks.nova import earlylog
from nova_pinning_hooks.nova import hook
from nova_pinning_hooks.nova import notifier


class Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append((record.levelname, record.name,
                           record.getMessage()))


class EarlyLogTestCase(testtools.TestCase):
    """The root logger as a process has it before oslo.log's ``setup``:
    Python's WARNING level and oslo's provisional stderr handler (or
    none)."""

    def setUp(self):
        super().setUp()
        root = logging.getLogger()
        package = logging.getLogger(earlylog.PACKAGE)
        saved = (list(root.handlers), root.level, package.level)
        self.provisional = Capture()  # oslo.log's, on stderr
        root.handlers[:] = [self.provisional]
        root.setLevel(logging.WARNING)

        def restore():
            earlylog.release(force=True)
            root.handlers[:] = saved[0]
            root.setLevel(saved[1])
            package.setLevel(saved[2])
        self.addCleanup(restore)
        # The watcher stays out of the way unless a test wants it.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.earlylog.POLL', 3600.0))
        self.log = logging.getLogger('nova_pinning_hooks.nova.activation')

    def set_up_logging(self, level=logging.INFO):
        """What oslo.log's ``setup`` does to the root logger."""
        root = logging.getLogger()
        capture = Capture()
        root.handlers[:] = [capture]
        root.setLevel(level)
        return capture

    def test_held_then_written_once_logging_is_set_up(self):
        self.assertTrue(earlylog.hold())
        self.log.info('nova-pinning-hooks: wrote %s', '/x/overcommit.json')
        self.log.debug('a debug line')
        self.log.warning('a warning')
        capture = self.set_up_logging(logging.INFO)
        self.assertEqual(2, earlylog.release())
        self.assertFalse(earlylog.holding())
        # Time, level and logger kept; DEBUG dropped at INFO.
        self.assertEqual(
            [('INFO', 'nova_pinning_hooks.nova.activation',
              'nova-pinning-hooks: wrote /x/overcommit.json'),
             ('WARNING', 'nova_pinning_hooks.nova.activation', 'a warning')],
            capture.lines)
        # From now on records go straight through, at the set-up level.
        self.log.info('after')
        self.log.debug('not at INFO')
        self.assertEqual('after', capture.lines[-1][2])
        self.assertEqual(3, len(capture.lines))
        # Meanwhile only the warning went to stderr, at once.
        self.assertEqual([('WARNING', 'nova_pinning_hooks.nova.activation',
                           'a warning')], self.provisional.lines)
        self.assertEqual(logging.NOTSET,
                         logging.getLogger(earlylog.PACKAGE).level)

    def test_debug_records_written_when_set_up_with_debug(self):
        earlylog.hold()
        self.log.debug('a debug line')
        capture = self.set_up_logging(logging.DEBUG)
        self.assertEqual(1, earlylog.release())
        self.assertEqual('a debug line', capture.lines[0][2])

    def test_kept_while_only_the_provisional_handler_is_there(self):
        earlylog.hold()
        self.log.info('early')
        logging.getLogger().setLevel(logging.INFO)  # no new handler yet
        self.assertEqual(0, earlylog.release())
        self.assertTrue(earlylog.holding())

    def test_nothing_held_when_logging_is_already_set_up(self):
        capture = self.set_up_logging(logging.INFO)
        self.assertFalse(earlylog.hold())
        self.assertFalse(earlylog.holding())
        self.log.info('direct')
        self.assertEqual([('INFO', 'nova_pinning_hooks.nova.activation',
                           'direct')], capture.lines)

    def test_the_watcher_gives_up_and_writes_them_anyway(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.earlylog.POLL', 0.01))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.earlylog.WATCH', 0.05))
        capture = Capture()
        logging.getLogger().addHandler(capture)  # not a set-up's
        earlylog.hold()
        self.log.error('never set up')
        deadline = time.monotonic() + 5
        while earlylog.holding() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertFalse(earlylog.holding())
        self.assertEqual(['never set up'], [m for _, _, m in capture.lines])

    def test_bounded(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.earlylog.LIMIT', 3))
        earlylog.hold()
        for i in range(5):
            self.log.info('line %d', i)
        capture = self.set_up_logging()
        self.assertEqual(3, earlylog.release())
        self.assertEqual(['line 0', 'line 1', 'line 2'],
                         [m for _, _, m in capture.lines[:3]])
        self.assertIn('2 log records from before logging was set up were '
                      'dropped', capture.lines[-1][2])

    def test_the_watcher_writes_them_without_any_hook(self):
        # An activation that failed installs no hook and no pass thread:
        # its error line must still reach the log.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.earlylog.POLL', 0.01))
        earlylog.hold()
        self.log.error('nova-pinning-hooks: not activated')
        capture = self.set_up_logging()
        deadline = time.monotonic() + 5
        while earlylog.holding() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([('ERROR', 'nova_pinning_hooks.nova.activation',
                           'nova-pinning-hooks: not activated')],
                         capture.lines)

    def test_a_hook_writes_them(self):
        earlylog.hold()
        self.log.info('activation line')
        capture = self.set_up_logging()
        hook.BindNumaAffinityHook().post(None)
        self.assertEqual('activation line', capture.lines[0][2])

    def test_the_switch_holds_what_activation_logs(self):
        # nova builds the driver inside parse_args, before logging.setup.
        def activate(conf):
            logging.getLogger('nova_pinning_hooks.nova.hookpoints').info(
                'nova-pinning-hooks: hook bind_numa_affinity runs after '
                'ComputeManager.init_host')
        with mock.patch.object(activation, 'in_nova_compute',
                               return_value=True), \
                mock.patch.object(activation, 'activate',
                                  side_effect=activate):
            notifier.ActivationDriver(None, topics=['n'], transport=None)
        self.assertTrue(earlylog.holding())
        capture = self.set_up_logging()
        earlylog.release()
        # ... and the line on the other notification drivers (none here).
        self.assertEqual(
            [('INFO', 'nova_pinning_hooks.nova.hookpoints',
              'nova-pinning-hooks: hook bind_numa_affinity runs after '
              'ComputeManager.init_host'),
             ('INFO', 'nova_pinning_hooks.nova.notifier',
              'nova-pinning-hooks: other notification drivers: none: no '
              "other service receives nova's notifications from this "
              'compute')], capture.lines)
