#!/usr/bin/env python3
"""Boot the VM tests' 2-socket host N times beside a load on every host CPU.

Usage (root, tools/setup-host.sh and tools/vm-image.sh done):
    python3 benchmarks/vm_boot_load.py [--boots 10] [--load 2]
                                       [--timeout 600] [--keep-failed]

Each boot is the VM tests' own (``tests/vm/machine.Machine``: the same
qemu command line, kernel command line and image), from a fresh overlay,
until the guest agent answers and systemd has finished starting up; then
the VM is powered off. Beside every boot, ``--load`` busy processes
(one per host CPU by default) keep the host's CPUs saturated, the way the
nova and cloud stages do when the VM tests run beside them in
``tools/run-tests.sh``. ``--load 0`` boots on a quiet host.

Per boot it prints the time to up, whether the boot failed, and what the
guest kernel said that matters here (``vmdiag.console_verdict``: a soft
lockup, a clocksource switch); at the end the distribution (min, median,
max) and the number of failed boots. Exit status: 0 when every boot came
up, 1 otherwise. The figures go in doc/source/isolation.rst ("The VM
tests").
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from tests.vm import machine, vmdiag  # noqa: E402

BUSY = 'import os\nos.nice(0)\nwhile True:\n    pass\n'


def start_load(n):
    return [subprocess.Popen([sys.executable, '-c', BUSY],
                             stdin=subprocess.DEVNULL)
            for _ in range(n)]


def stop_load(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait(30)


def one_boot(image, timeout, keep_failed):
    vm = machine.Machine(image=image)
    start = time.monotonic()
    ok, why = True, ''
    try:
        vm.boot(timeout=timeout, source=False)
    except machine.VMError as exc:
        ok, why = False, str(exc).splitlines()[0]
    seconds = time.monotonic() - start
    verdict = vmdiag.console_verdict(vm.console_text())
    vm.stop(timeout=60)
    if ok or not keep_failed:
        shutil.rmtree(vm.workdir, ignore_errors=True)
    else:
        why += ' (kept: %s)' % vm.workdir
    return ok, seconds, verdict, why


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--boots', type=int, default=10)
    parser.add_argument('--load', type=int, default=os.cpu_count())
    parser.add_argument('--timeout', type=int, default=600)
    parser.add_argument('--keep-failed', action='store_true')
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit('vm_boot_load: run me as root')
    image = machine.image_dir()
    print('image %s; %d boots, %d busy processes beside each, '
          '%d host CPUs' % (image, args.boots, args.load, os.cpu_count()))
    times, failed = [], 0
    for i in range(1, args.boots + 1):
        load = start_load(args.load)
        try:
            ok, seconds, verdict, why = one_boot(image, args.timeout,
                                                 args.keep_failed)
        finally:
            stop_load(load)
        if ok:
            times.append(seconds)
        else:
            failed += 1
        print('boot %2d: %-6s %6.1f s  %s%s' % (
            i, 'up' if ok else 'FAILED', seconds, verdict or '-',
            ('; ' + why) if why else ''), flush=True)
    if times:
        print('up %d of %d; time to up: min %.1f s, median %.1f s, '
              'max %.1f s' % (len(times), args.boots, min(times),
                              statistics.median(times), max(times)))
    print('failed boots: %d' % failed)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
