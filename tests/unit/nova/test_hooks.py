"""nova.hooks semantics and the hook points, with stevedore test managers."""

import inspect
import threading
import time
import traceback
from unittest import mock

import fixtures
from stevedore import extension
import testtools

from nova_pinning_hooks.nova import hook
from nova_pinning_hooks.nova import hookpoints
from nova_pinning_hooks.nova import hooks


class Recorder:
    def __init__(self, fail=None):
        self.calls = []
        self.fail = fail

    def pre(self, *args, **kwargs):
        self.calls.append(('pre', args, kwargs))
        if self.fail == 'pre':
            raise RuntimeError('pre broke')
        if self.fail == 'fatal':
            raise hooks.FatalHookException('stop')

    def post(self, rv, *args, **kwargs):
        self.calls.append(('post', rv, args, kwargs))
        if self.fail == 'post':
            raise RuntimeError('post broke')


def use_hooks(test, *objs, name='bind_numa_affinity'):
    exts = [extension.Extension('h%d' % i, None, type(o), o)
            for i, o in enumerate(objs)]
    mgr = hooks.HookManager.make_test_instance(exts, hooks.NAMESPACE)
    test.useFixture(fixtures.MonkeyPatch(
        'nova_pinning_hooks.nova.hooks._MANAGERS', {name: mgr}))


class TestAddHook(testtools.TestCase):

    def test_pre_and_post_around_the_call(self):
        rec = Recorder()
        use_hooks(self, rec)

        @hooks.add_hook('bind_numa_affinity')
        def op(a, b=2):
            rec.calls.append(('call', a, b))
            return a + b
        self.assertEqual(5, op(3, b=2))
        self.assertEqual([('pre', (3,), {'b': 2}), ('call', 3, 2),
                          ('post', 5, (3,), {'b': 2})], rec.calls)

    def test_failing_hooks_are_ignored(self):
        for where in ('pre', 'post'):
            use_hooks(self, Recorder(fail=where))

            @hooks.add_hook('bind_numa_affinity')
            def op():
                return 'rv'
            self.assertEqual('rv', op())

    def test_fatal_hook_stops_the_call(self):
        use_hooks(self, Recorder(fail='fatal'))
        called = []

        @hooks.add_hook('bind_numa_affinity')
        def op():
            called.append(1)
        self.assertRaises(hooks.FatalHookException, op)
        self.assertEqual([], called)

    def test_exception_of_the_call_unchanged_and_no_post(self):
        rec = Recorder()
        use_hooks(self, rec)
        error = ValueError('nova failed')

        @hooks.add_hook('bind_numa_affinity')
        def op():
            raise error
        raised = self.assertRaises(ValueError, op)
        self.assertIs(error, raised)
        self.assertEqual(['pre'], [c[0] for c in rec.calls])

    def test_real_entry_point_is_the_bind_hook(self):
        hooks.reset()
        self.addCleanup(hooks.reset)
        mgr = hooks.manager('bind_numa_affinity')
        self.assertEqual([hook.BindNumaAffinityHook],
                         [type(e.obj) for e in mgr.extensions])


class FakeManager:
    """Stands in for ComputeManager."""

    def stop_instance(self, context, instance, clean_shutdown=True):
        """Stop it."""
        return 'stopped'

    def start_instance(self, context, instance):
        raise RuntimeError('cannot start')

    def other(self):
        return 'untouched'


class TestHookPoints(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.cls = type('Manager', (FakeManager,), dict(vars(FakeManager)))
        hooks.reset()
        self.addCleanup(hooks.reset)
        self.requests = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.activation.request_pass',
            lambda reason, host=None: self.requests.append(reason)))

    def test_install_wraps_and_keeps_signature(self):
        before = inspect.signature(self.cls.stop_instance)
        wrapped, already, missing = hookpoints.install(
            self.cls, ['stop_instance', 'start_instance', 'live_resize'],
            'bind_numa_affinity')
        self.assertEqual(['stop_instance', 'start_instance'], wrapped)
        self.assertEqual(['live_resize'], missing)
        self.assertEqual(before, inspect.signature(self.cls.stop_instance))
        self.assertEqual('stop_instance', self.cls.stop_instance.__name__)
        self.assertEqual('Stop it.', self.cls.stop_instance.__doc__)
        self.assertIs(FakeManager.other, self.cls.other)

    def test_each_operation_requests_exactly_one_pass(self):
        hookpoints.install(self.cls, ['stop_instance'], 'bind_numa_affinity')
        m = self.cls()
        self.assertEqual('stopped', m.stop_instance('ctx', 'inst'))
        # The reason names the hooked method.
        self.assertEqual(['stop_instance'], self.requests)
        m.other()
        self.assertEqual(1, len(self.requests))

    def test_inherited_method_is_hooked(self):
        sub = type('Sub', (FakeManager,), {})
        wrapped, _, missing = hookpoints.install(sub, ['stop_instance'],
                                                 'bind_numa_affinity')
        self.assertEqual((['stop_instance'], []), (wrapped, missing))
        self.assertEqual('stopped', sub().stop_instance('c', 'i'))
        self.assertEqual(['stop_instance'], self.requests)
        self.assertIs(FakeManager.stop_instance,
                      vars(FakeManager)['stop_instance'])

    def test_install_twice_wraps_once(self):
        hookpoints.install(self.cls, ['stop_instance'], 'bind_numa_affinity')
        _, already, _ = hookpoints.install(self.cls, ['stop_instance'],
                                           'bind_numa_affinity')
        self.assertEqual(['stop_instance'], already)
        self.cls().stop_instance('ctx', 'inst')
        self.assertEqual(1, len(self.requests))

    def test_failed_operation_raises_unchanged_and_requests_nothing(self):
        hookpoints.install(self.cls, ['start_instance'],
                           'bind_numa_affinity')
        exc = self.assertRaises(RuntimeError, self.cls().start_instance,
                                'ctx', 'inst')
        self.assertEqual('cannot start', str(exc))
        self.assertEqual([], self.requests)

    def test_a_failure_of_nova_says_so_in_its_traceback(self):
        # Issue 34 R7: the wrapper is the outermost frame of every hooked
        # nova method, so nova's own failures showed ".../nova/hooks.py,
        # in inner" as if they were ours. The frame says whose failure it
        # is; the exception nova sees is its own object, unchanged.
        boom = RuntimeError('cannot start')

        def start_instance(self, context, instance):
            raise boom
        self.cls.start_instance = start_instance
        hookpoints.install(self.cls, ['start_instance'],
                           'bind_numa_affinity')
        try:
            self.cls().start_instance('ctx', 'inst')
        except RuntimeError as exc:
            caught, text = exc, traceback.format_exc()
        self.assertIs(boom, caught)
        self.assertEqual((None, None, 'cannot start'),
                         (caught.__cause__, caught.__context__, str(caught)))
        frames = traceback.extract_tb(caught.__traceback__)
        ours = [f for f in frames if f.filename == hooks.__file__]
        self.assertEqual(1, len(ours), text)
        self.assertEqual('hooked_nova_method', ours[0].name)
        self.assertIn("nova's own code raised, not a hook", ours[0].line)
        self.assertIn("nova's own code raised, not a hook", text)
        self.assertEqual('start_instance', frames[-1].name)  # raised there

    def test_uninstall(self):
        hookpoints.install(self.cls, ['stop_instance'], 'bind_numa_affinity')
        hookpoints.uninstall(self.cls, 'bind_numa_affinity')
        self.assertIs(FakeManager.stop_instance, self.cls.stop_instance)

    def test_hook_never_raises_into_nova(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.activation.request_pass',
            mock.Mock(side_effect=RuntimeError('queue broke'))))
        hookpoints.install(self.cls, ['stop_instance'], 'bind_numa_affinity')
        self.assertEqual('stopped', self.cls().stop_instance('c', 'i'))


class TestBursts(testtools.TestCase):
    """Forty parallel operations, few passes, no caller waits."""

    def test_parallel_operations_coalesce(self):
        passes = []
        release = threading.Event()

        class FakeAgent:
            coalescer = None

            def request(self, reason, host=None):
                return self.coalescer.request(reason)
        from nova_pinning_hooks.passes import coalescer

        def run():
            passes.append(1)
            release.wait(5)
        fake = FakeAgent()
        fake.coalescer = coalescer.Coalescer(run, delay=0.05)
        self.addCleanup(fake.coalescer.stop)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_pinning_hooks.nova.activation._RUNTIME', fake))
        cls = type('Manager', (FakeManager,), dict(vars(FakeManager)))
        hooks.reset()
        self.addCleanup(hooks.reset)
        hookpoints.install(cls, ['stop_instance'], 'bind_numa_affinity')
        m = cls()
        threads = [threading.Thread(target=m.stop_instance, args=('c', i))
                   for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
            self.assertFalse(t.is_alive())  # nobody waited for a pass
        for _ in range(100):  # the burst reached the worker
            if passes:
                break
            time.sleep(0.05)
        self.assertEqual(1, len(passes))
        release.set()
        self.assertTrue(fake.coalescer.request('final', wait=True,
                                               timeout=10))
        self.assertLessEqual(len(passes), 3)
