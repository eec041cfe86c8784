"""Inside another PID namespace (kolla's nova_compute): right or silent.

The commands run under ``unshare --pid --fork --mount-proc`` against the
host's libvirtd and ``/run``. In that namespace a decoy process is made to
hold the guest's qemu pid number (``/proc/sys/kernel/ns_last_pid`` set
before forking it), named like a vCPU thread (``CPU 0/KVM``) and bound to
a CPU the guest is not pinned to. Nothing may be read from it: the guest's
memory placement and kernel affinity are unknown, ``status`` says so, and
a pass repairs no "drift".
"""

import json
import os
import shutil
import subprocess
import sys

from tests.functional import base

# Runs as pid 1 of the new namespace: forks the decoy with the wanted pid,
# then runs each command and prints their results as one JSON document.
DRIVER = r'''
import json, os, subprocess, sys
pid, cpu, commands = json.loads(sys.argv[1])
with open('/proc/sys/kernel/ns_last_pid', 'w') as f:
    f.write(str(pid - 1))
decoy = subprocess.Popen([sys.executable, '-c', sys.argv[2], str(cpu)],
                         stdout=subprocess.PIPE)
decoy.stdout.readline()  # renamed and bound
found = {'decoy_pid': decoy.pid, 'runs': []}
for argv in commands:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    found['runs'].append([p.returncode, p.stdout, p.stderr])
with open('/proc/%d/numa_maps' % decoy.pid) as f:
    found['decoy_numa_maps_lines'] = len(f.readlines())
found['decoy_affinity'] = sorted(os.sched_getaffinity(decoy.pid))
decoy.kill()
decoy.wait()
print(json.dumps(found))
'''

DECOY = r'''
import os, sys, time
with open('/proc/self/comm', 'w') as f:
    f.write('CPU 0/KVM')
os.sched_setaffinity(0, {int(sys.argv[1])})
print('ready', flush=True)
time.sleep(600)
'''


class TestOtherPidNamespace(base.FunctionalTestCase):

    def in_namespace(self, pid, cpu, *commands):
        unshare = shutil.which('unshare')
        self.assertIsNotNone(unshare, 'unshare (util-linux) is missing')
        argv = [unshare, '--pid', '--fork', '--mount-proc', sys.executable,
                '-c', DRIVER, json.dumps([pid, cpu,
                                          [self.cli_argv(*c)
                                           for c in commands]]), DECOY]
        proc = subprocess.run(argv, capture_output=True, text=True,
                              timeout=300, cwd=base.TOP)
        self.assertEqual(0, proc.returncode, proc.stderr)
        return json.loads(proc.stdout)

    def test_decoy_holding_the_qemu_pid_is_never_read(self):
        a = self.boot('pidns')
        proc = self.cli('rebind')
        self.assertEqual(0, proc.returncode, proc.stderr)
        pins = self.libvirt_pins(a)
        self.assertPinned(a, pins)
        pinned = pins[0]
        # The decoy runs where the guest's vCPU is not pinned: read from
        # it, the affinity would be drift.
        other = min(set(os.sched_getaffinity(0)) - pinned)
        qemu = self.pid(a)

        found = self.in_namespace(qemu, other,
                                  ('snapshot',),
                                  ('status', '--format', 'json'),
                                  ('status',),
                                  ('rebind',))
        # The decoy really holds the qemu's pid number there, looks like a
        # vCPU thread, runs elsewhere and has memory mappings of its own.
        self.assertEqual(qemu, found['decoy_pid'])
        self.assertEqual([other], found['decoy_affinity'])
        self.assertGreater(found['decoy_numa_maps_lines'], 0)
        (snap_rc, snap_out, snap_err), (js_rc, js_out, js_err), \
            (st_rc, st_out, st_err), (rb_rc, rb_out, rb_err) = found['runs']

        self.assertEqual(0, snap_rc, snap_err)
        dom = [d for d in json.loads(snap_out)['domains']
               if '<name>%s</name>' % a.name() in d['xml']][0]
        self.assertEqual({}, dom['memory_by_node_kib'])
        self.assertEqual({}, dom.get('kernel_vcpu_affinity', {}))

        self.assertEqual(0, js_rc, js_err)
        status = json.loads(js_out)
        guest = {g['name']: g for g in status['guests']}[a.name()]
        self.assertEqual({}, guest['kernel_drift'])
        self.assertEqual('unknown', guest['kernel_facts'])
        self.assertIn('is not its qemu',
                      status['kernel_facts_unknown'][a.name()])
        self.assertTrue(guest['live_matches_plan'])
        # Not a warning in a one-shot command: a first refusal is said at
        # debug level (in a burst of boots it is libvirt's child before
        # it exec'd qemu); a long-running agent warns once it persists.
        # status names the guest and why (above, and in its table below).
        self.assertEqual(0, js_err.count('not proven to be its qemu'),
                         js_err)

        self.assertEqual(0, st_rc, st_err)
        self.assertIn('kernel facts unknown: %s' % a.name(), st_out)
        self.assertNotIn('kernel drift', st_out)

        self.assertEqual(0, rb_rc, rb_err)
        # No change for the guest: no "drift" repaired from the decoy.
        self.assertNotIn(a.name(), rb_out)
        self.assertIn('libvirt calls', rb_out)
        # The guest keeps its pins; the decoy was not moved either.
        self.assertPinned(a, pins)

    def test_on_the_host_the_pid_is_proven(self):
        # The same commands in the host's namespace read the guest.
        a = self.boot('pidns-host')
        proc = self.cli('status', '--format', 'json')
        self.assertEqual(0, proc.returncode, proc.stderr)
        status = json.loads(proc.stdout)
        guest = {g['name']: g for g in status['guests']}[a.name()]
        self.assertEqual('read', guest['kernel_facts'])
        self.assertNotIn(a.name(), status['kernel_facts_unknown'])
        proc = self.cli('snapshot')
        dom = [d for d in json.loads(proc.stdout)['domains']
               if '<name>%s</name>' % a.name() in d['xml']][0]
        self.assertGreater(dom['memory_by_node_kib'].get('0', 0), 0)
        self.assertEqual({'0'}, set(dom['kernel_vcpu_affinity']))
