"""Start up like nova-compute in native threading mode, against this
host's real libvirtd, and time the package's passes (issue 40, M-1).

    python pass_timing_child.py CONFIG_FILE GUESTS PASSES GIVE_UP

Run by test_pass_timing.py inside ``bus_namespace.py`` (a system bus that
answers, or one that hangs). The configuration sets ``[nova_pinning]
metrics_textfile`` and the isolation (``reserved_cpus``,
``[nova_pinning_isolation] cgroup_mode = systemd``), so the textfile is
written on nova-compute's pass thread after each pass, with the
isolation series. The child

* boots GUESTS tiny guests with nova's metadata one after the other, each
  right after a pass ended, as a build does, and asks for a pass as
  nova's hook after ``_do_build_and_run_instance`` does
  (``PassRunner.request``): how long until libvirt has its vCPU pinned
  (``boot_to_pinned``);
* with one guest running, asks for PASSES passes back to back (each as
  soon as the one before was served): ``pass_to_pass``, from one pass's
  start to the next's;

and records every pass (start, end: ``Reconciler.run_pass``) and every
textfile write (``textfile.after_pass``) on the pass thread. A wait
longer than GIVE_UP seconds is given up (``null``); a phase stops after
two waits that took longer than a tenth of it.
"""

import json
import os
import sys
import threading
import time

mode_conf = sys.argv[1]
GUESTS, PASSES, GIVE_UP = (int(sys.argv[2]), int(sys.argv[3]),
                           float(sys.argv[4]))
os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = '1'
sys.argv = ['nova-compute', '--config-file', mode_conf]

import nova.cmd.compute  # noqa: E402,F401
from nova import config  # noqa: E402
from nova import objects  # noqa: E402

config.parse_args(sys.argv)
from oslo_log import log as oslo_logging  # noqa: E402

import nova.conf  # noqa: E402

oslo_logging.setup(nova.conf.CONF, 'nova')
objects.register_all()

import libvirt  # noqa: E402

from nova_pinning_hooks.nova import activation  # noqa: E402
from nova_pinning_hooks.observe import textfile  # noqa: E402
from nova_pinning_hooks.passes import reconciler  # noqa: E402

T0 = time.monotonic()
passes = []  # [start, end] of each pass, seconds since T0
writes = []  # [start, seconds] of each textfile write
pass_ended = threading.Condition()
run_pass = reconciler.Reconciler.run_pass
after_pass = textfile.after_pass


def timed_pass(self, *args, **kwargs):
    entry = [time.monotonic() - T0, None]
    passes.append(entry)
    try:
        return run_pass(self, *args, **kwargs)
    finally:
        entry[1] = time.monotonic() - T0
        with pass_ended:
            pass_ended.notify_all()


def timed_write(*args, **kwargs):
    start = time.monotonic()
    try:
        return after_pass(*args, **kwargs)
    finally:
        writes.append([start - T0, time.monotonic() - start])


reconciler.Reconciler.run_pass = timed_pass
textfile.after_pass = timed_write

a = activation._RUNTIME
report = {'active': a is not None,
          'out_of_process': a is not None and a.out_of_process}
if a is None or a.out_of_process:
    print('REPORT ' + json.dumps(report), flush=True)
    os._exit(0)
conf = a.config.observe  # the metrics textfile
GUEST_XML = """<domain type='{type}'>
  <name>{name}</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:name>{name}</nova:name>
    </nova:instance>
  </metadata>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices>
</domain>"""
PREFIX = 'nph-nova-timing-'
try:
    with open('/run/nova-pinning-hooks/virt-type') as f:
        VIRT_TYPE = f.read().strip() or 'qemu'
except OSError:
    VIRT_TYPE = 'qemu'
conn = libvirt.open('qemu:///system')
for dom in conn.listAllDomains():
    if dom.name().startswith(PREFIX):
        dom.destroy()
ONLINE = os.cpu_count()


def pins(dom):
    """Each vCPU's CPUs as libvirt says."""
    info = dom.vcpuPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE)
    return [frozenset(i for i, on in enumerate(m) if on) for m in info]


def ask(reason, limit):
    """Ask for a pass as nova's hooks do (``PassRunner.request``) and wait
    until a pass that started after the request has ended; whether one
    did within ``limit`` seconds, and how long it took."""
    asked = time.monotonic() - T0
    a.request(reason)

    def served():
        return any(p[0] >= asked and p[1] is not None for p in passes)
    with pass_ended:
        done = pass_ended.wait_for(served, limit)
    return done, time.monotonic() - T0 - asked


report['first_pass_served'], report['first_pass_wait'] = ask(
    'settle', GIVE_UP)

# 1. Guests: each booted right after a pass ended (the textfile write
# of that pass, if any, runs now on the pass thread), then the hook's
# request; the time until its vCPU is pinned away from every CPU.
report['boot_to_pinned'] = []
slow = 0
for i in range(GUESTS):
    ask('before guest %d' % i, GIVE_UP)
    name = '%s%d' % (PREFIX, i)
    dom = conn.createXML(GUEST_XML.format(type=VIRT_TYPE, name=name), 0)
    booted = time.monotonic()
    a.request('build %s' % name)  # nova's hook, after the build
    took = None
    while time.monotonic() - booted < GIVE_UP:
        now = pins(dom)
        if now and all(len(p) < ONLINE for p in now):
            took = time.monotonic() - booted
            break
        time.sleep(0.05)
    report['boot_to_pinned'].append(took)
    report.setdefault('pinned_to', []).append(
        sorted(sorted(p) for p in set(pins(dom))))
    dom.destroy()
    a.request('terminate %s' % name)
    if took is None or took > GIVE_UP / 10:
        slow += 1
        if slow >= 2:
            break
report['settled_after_guests'] = ask('settle', GIVE_UP)[0]

# 2. Passes back to back, a guest running (its vCPU counters in every
# textfile): each asked for as soon as the last was served.
steady = conn.createXML(GUEST_XML.format(type=VIRT_TYPE,
                                         name=PREFIX + 'steady'), 0)
ask('steady guest', GIVE_UP)
time.sleep(5)  # its qemu has started up
first, first_write = len(passes), len(writes)
slow = 0
report['back_to_back_waits'] = []
for i in range(PASSES):
    served, waited = ask('back to back %d' % i, GIVE_UP)
    report['back_to_back_waits'].append(waited if served else None)
    if not served or waited > GIVE_UP / 10:
        slow += 1
        if not served or slow >= 2:
            break
starts = [p[0] for p in passes[first:]]
report['pass_to_pass'] = [b - a_ for a_, b in zip(starts, starts[1:])]
report['steady_textfile_seconds'] = [w[1] for w in writes[first_write:]]
report['steady_pinned_to'] = sorted(sorted(p) for p in set(pins(steady)))
steady.destroy()
report['passes'] = passes
report['writes'] = writes
report['pass_seconds'] = [p[1] - p[0] for p in passes if p[1] is not None]
report['textfile_seconds'] = [w[1] for w in writes]
report['last_error'] = repr(getattr(a.last_result, 'error', None))
try:
    with open(conf.metrics_textfile) as f:
        text = f.read()
    report['textfile_isolation'] = sorted(
        line for line in text.splitlines()
        if line.startswith('nova_pinning_isolation_') and
        ('units' in line or 'status_stale' in line or 'applied' in line))
except OSError as exc:
    report['textfile_isolation'] = str(exc)
print('REPORT ' + json.dumps(report), flush=True)
os._exit(0)  # nova's service machinery is not running: skip its teardown
