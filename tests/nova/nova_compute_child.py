"""Start up like nova-compute, switch nova-pinning-hooks on the way an
operator does, exercise a hooked method, and print a JSON report.

Run as a child process by test_nova.py (one process per concurrency mode,
since monkey patching is process-wide):

    python nova_compute_child.py threading|eventlet CONFIG_FILE [fake]

``fake`` swaps libvirt for tests/fakelibvirt.py with one nova guest on
the fake host at ``NOVA_URI`` (the configuration's ``[libvirt]
connection_uri``) and another on a decoy host at ``qemu:///system``, so
the in-process pass can be checked; without it passes use the libvirt of
the configuration. Like nova-compute, the child sets up logging
(``oslo_log.log.setup``) right after parsing its configuration.
"""

import inspect
import json
import os
import sys
from unittest import mock

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
NOVA_URI = 'qemu+tcp://nova-libvirt.invalid/system'
mode, conf_path = sys.argv[1], sys.argv[2]
use_fake = len(sys.argv) > 3 and sys.argv[3] == 'fake'
os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = (
    '1' if mode == 'threading' else '0')
sys.argv = ['nova-compute', '--config-file', conf_path]

# What the nova-compute console script does first: importing
# nova.cmd.compute applies (or forbids) eventlet monkey patching.
import nova.cmd.compute  # noqa: E402,F401

from nova.compute import manager  # noqa: E402

if use_fake:
    # The package as installed (tox's wheel) first; the checkout is on
    # the path for the test helpers (tests.*) only.
    import nova_pinning_hooks  # noqa: E402,F401
    sys.path.insert(0, TOP)
    from nova_pinning_hooks.host import libvirtapi  # noqa: E402
    from nova_pinning_hooks.host import virtread  # noqa: E402
    from tests import fakelibvirt  # noqa: E402
    from tests.unit import hosts  # noqa: E402
    libvirtapi.libvirt = fakelibvirt
    FAKE = fakelibvirt.FakeHost(hosts.load('small-1node'))
    fakelibvirt.register(NOVA_URI, FAKE)
    FAKE.add_domain('instance-00000001', 2,
                    xml=hosts.domain_xml('instance-00000001', 2))
    # Another compute's libvirt at the package's own default URI: nothing
    # of it may be touched.
    DECOY = fakelibvirt.FakeHost(hosts.load('small-1node'))
    fakelibvirt.register('qemu:///system', DECOY)
    DECOY.add_domain('instance-00000002', 2,
                     xml=hosts.domain_xml('instance-00000002', 2))
    virtread.Reader._memory_from_proc = lambda self, name: {'0': 65536}

CM = manager.ComputeManager
before = {name: (str(inspect.signature(getattr(CM, name))),
                 getattr(CM, name).__doc__,
                 getattr(getattr(CM, name), '__name__', None))
          for name in dir(CM) if callable(getattr(CM, name, None))
          and not name.startswith('__')}

from nova import config  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402

# nova-compute's own start-up: parsing the configuration initialises
# oslo.messaging, which loads the configured notification drivers,
# nova_pinning among them: that activates the hooks.
config.parse_args(sys.argv)
# nova/cmd/compute.py's next line: logging is set up only now.
from oslo_log import log as oslo_logging  # noqa: E402

import nova.conf  # noqa: E402

oslo_logging.setup(nova.conf.CONF, 'nova')
objects.register_all()

from nova_pinning_hooks.nova import activation  # noqa: E402
from nova_pinning_hooks.nova import passrunner  # noqa: E402
from nova_pinning_hooks.nova import hookpoints  # noqa: E402

# In threading mode nova forbids importing eventlet from now on: every
# module of the package must still import.
import importlib  # noqa: E402
import pkgutil  # noqa: E402

import nova_pinning_hooks  # noqa: E402

imported = []
for info in pkgutil.walk_packages(nova_pinning_hooks.__path__,
                                  'nova_pinning_hooks.'):
    importlib.import_module(info.name)
    imported.append(info.name)

from nova import monkey_patch  # noqa: E402

report = {'mode': mode, 'imported': imported,
          # nova 32 and later: a native threading mode that forbids
          # eventlet; before, the variable only leaves eventlet unpatched.
          'native_threading': hasattr(monkey_patch, 'poison_eventlet'),
          'eventlet_loaded': 'eventlet' in sys.modules,
          'eventlet_patched': passrunner.eventlet_patched()}
# The runtime activate made, as tests/fixtures.py's current_runtime reads
# it (the checkout, and so tests.fixtures, is on the path only with fake).
a = activation._RUNTIME
report['active'] = a is not None
if a is None:
    print(json.dumps(report))
    sys.exit(0)
report['out_of_process'] = a.out_of_process
report['connection_uri'] = a.config.passes.connection_uri
# Out of process: the worker's command line (a thread runner has none).
report['child_argv'] = a.child_argv() if a.out_of_process else None
report['wrapped'] = sorted(
    n for n, v in vars(CM).items()
    if getattr(v, hookpoints.MARK, None) == 'bind_numa_affinity')
# Signature, docstring and __name__ as nova's own decorators left them.
report['signatures_kept'] = all(
    (str(inspect.signature(getattr(CM, n))), getattr(CM, n).__doc__,
     getattr(getattr(CM, n), '__name__', None)) == before[n]
    for n in report['wrapped'])

# The first pass (service start) has run or is queued; let it finish.
a.coalescer.request('settle', wait=True, timeout=60)
report['first_pass'] = repr(a.last_result if a.out_of_process
                            else getattr(a.last_result, 'error', 'n/a'))
if use_fake:
    report['fake_pins'] = {
        str(v): list(c) for v, c in
        FAKE.by_name('instance-00000001').vcpu_pins.items()}
    report['decoy_pins'] = {
        str(v): list(c) for v, c in
        DECOY.by_name('instance-00000002').vcpu_pins.items()}
    report['decoy_calls'] = sum(DECOY.calls.values())


def call_pause(fail):
    """ComputeManager.pause_instance through nova's own decorators."""
    ctx = nova_context.get_admin_context()
    inst = mock.MagicMock()
    inst.uuid = '6f1c2a44-0000-4000-8000-000000000001'
    inst.__getitem__.side_effect = lambda k: {'uuid': inst.uuid}[k]
    mgr = mock.MagicMock()
    error = RuntimeError('libvirt said no')
    if fail:
        mgr.driver.pause.side_effect = error
    with mock.patch.object(objects.InstanceActionEvent, 'event_start'), \
            mock.patch.object(objects.InstanceActionEvent,
                              'event_finish_with_failure'), \
            mock.patch('nova.compute.utils.notify_about_instance_action'), \
            mock.patch('nova.compute.utils.add_instance_fault_from_exc'):
        try:
            rv = CM.pause_instance(mgr, ctx, inst)
        except RuntimeError as exc:
            return {'raised_same': exc is error, 'driver_called':
                    mgr.driver.pause.called}
        return {'rv': repr(rv), 'driver_called': mgr.driver.pause.called}


requested = a.coalescer._requested
report['ok_call'] = call_pause(fail=False)
report['requests_after_ok'] = a.coalescer._requested - requested
requested = a.coalescer._requested
report['failed_call'] = call_pause(fail=True)
report['requests_after_failure'] = a.coalescer._requested - requested


@manager.wrap_exception()
def returns_a_value(self, context, instance):
    """A method under nova's decorator whose value must come through."""
    return 42


Probe = type('Probe', (), {'returns_a_value': returns_a_value})
hookpoints.install(Probe, ['returns_a_value'], 'bind_numa_affinity')
requested = a.coalescer._requested
report['value_through_hook'] = Probe().returns_a_value(
    nova_context.get_admin_context(), None)
report['requests_after_value'] = a.coalescer._requested - requested
# While a pass runs, nova's other threads (green ones too) keep running:
# a ticker records the longest gap between its ticks.
import threading  # noqa: E402
import time  # noqa: E402

gaps, ticking = [0.0], threading.Event()


def ticker():
    last = time.monotonic()
    while not ticking.is_set():
        time.sleep(0.01)
        now = time.monotonic()
        gaps[0] = max(gaps[0], now - last)
        last = now


t = threading.Thread(target=ticker)
t.start()
a.coalescer.request('final', wait=True, timeout=60)
ticking.set()
t.join()
report['longest_tick_gap_during_pass'] = gaps[0]
report['last_pass'] = repr(a.last_result if a.out_of_process
                           else getattr(a.last_result, 'error', 'n/a'))
worker = a.worker if a.out_of_process else None
report['worker_alive'] = worker is not None and worker.poll() is None
report['worker_starts'] = a.worker_starts if a.out_of_process else 0
if a.out_of_process:
    time.sleep(1.5)  # the worker's passes, for its log on our stderr
print('REPORT ' + json.dumps(report))
sys.stdout.flush()
os._exit(0)  # nova's service machinery is not running: skip its teardown
