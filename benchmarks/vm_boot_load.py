#!/usr/bin/env python3
"""Boot the VM tests' 2-socket host N times beside a load on the host.

Usage (root, tools/setup-host.sh and tools/vm-image.sh done):
    python3 benchmarks/vm_boot_load.py [--boots 10] [--config after]
        [--load stress|busy|none] [--timeout 600] [--keep-failed]

Each boot is the VM tests' own (``tests/vm/machine.Machine``: the same
qemu command line, kernel command line and image), from a fresh overlay,
until the guest agent answers and systemd has finished starting up; then
the VM is powered off.

``--config``: ``after`` boots the VM as the tests do now; ``before`` as
they did until issue 39 (multi-threaded TCG, eight vCPU threads at the
host's default priority, the kernel left to measure its TSC and check
its timer); ``both`` boots one of each side by side in every round, under
the same load.

``--load``: ``stress`` (the default) runs ``stress-ng --cpu 8 --io 1
--vm 1 --vm-bytes 2G --switch 2`` for the whole run (CPU, I/O, memory
and context switches, as the nova and cloud stages give when the VM
tests run beside them in ``tools/run-tests.sh``; Debian's stress-ng,
installed if missing); ``busy`` one busy loop per host CPU; ``none`` a
quiet host.

Per boot: the time to up, or why it did not come up (the one line of
``machine.BootError``), and what the guest kernel said that matters
(``vmdiag.console_verdict``); at the end, per configuration, the number
of boots that came up and the distribution of their times. Exit status:
0 when every boot of the ``after`` configuration came up, 1 otherwise.
The figures are in doc/source/reference/isolation-evidence.rst ("The VM
under load").
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from tests.vm import machine, vmdiag  # noqa: E402

BUSY = 'while True:\n    pass\n'
STRESS = ['stress-ng', '--cpu', '8', '--io', '1', '--vm', '1',
          '--vm-bytes', '2G', '--switch', '2', '--timeout', '86400s']
# The VM as the tests booted it until issue 39.
BEFORE_ARGS = ('root=/dev/vda', 'rw', 'console=ttyS0', 'mitigations=off',
               'systemd.unified_cgroup_hierarchy=1')


class Before(machine.Machine):
    """Multi-threaded TCG, default priority, the old kernel command
    line."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.kernel_args = BEFORE_ARGS

    def _argv(self):
        argv = super()._argv()
        argv[argv.index('tcg,thread=single')] = 'tcg,thread=multi'
        return argv

    def _start(self):
        with open(os.path.join(self.workdir, 'qemu.log'), 'ab') as log:
            self.qemu = subprocess.Popen(
                self._argv(), stdin=subprocess.DEVNULL, stdout=log,
                stderr=log)


def start_load(kind):
    if kind == 'none':
        return []
    if kind == 'busy':
        return [subprocess.Popen([sys.executable, '-c', BUSY],
                                 stdin=subprocess.DEVNULL)
                for _ in range(os.cpu_count() or 1)]
    if shutil.which('stress-ng') is None:
        subprocess.run(['apt-get', 'install', '-y', '-qq', 'stress-ng'],
                       check=True, timeout=600, capture_output=True)
    return [subprocess.Popen(STRESS, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)]


def stop_load(procs):
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)


def one_boot(cls, image, timeout, keep_failed, out, key):
    vm = cls(image=image)
    start = time.monotonic()
    ok, why = True, ''
    try:
        vm.boot(timeout=timeout, source=False)
    except machine.VMError as exc:
        ok, why = False, str(exc).splitlines()[0]
    seconds = time.monotonic() - start
    verdict = vmdiag.console_verdict(vm.console_text(), vm.tsc_khz)
    vm.stop(timeout=60)
    if ok or not keep_failed:
        shutil.rmtree(vm.workdir, ignore_errors=True)
    else:
        why += ' (kept: %s)' % vm.workdir
    out[key] = (ok, seconds, verdict, why)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--boots', type=int, default=10)
    parser.add_argument('--config', choices=('after', 'before', 'both'),
                        default='after')
    parser.add_argument('--load', choices=('stress', 'busy', 'none'),
                        default='stress')
    parser.add_argument('--timeout', type=int, default=600)
    parser.add_argument('--keep-failed', action='store_true')
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit('vm_boot_load: run me as root')
    image = machine.image_dir()
    configs = {'after': [('after', machine.Machine)],
               'before': [('before', Before)],
               'both': [('before', Before), ('after', machine.Machine)]
               }[args.config]
    print('image %s; %d rounds of %s, load %s, %d host CPUs, boot timeout '
          '%d s' % (image, args.boots, '+'.join(n for n, _ in configs),
                    args.load, os.cpu_count(), args.timeout), flush=True)
    times = {name: [] for name, _ in configs}
    failed = {name: 0 for name, _ in configs}
    load = start_load(args.load)
    try:
        for i in range(1, args.boots + 1):
            out = {}
            threads = [threading.Thread(target=one_boot, args=(
                cls, image, args.timeout, args.keep_failed, out, name))
                for name, cls in configs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for name, _ in configs:
                ok, seconds, verdict, why = out[name]
                if ok:
                    times[name].append(seconds)
                else:
                    failed[name] += 1
                # A failure's line already holds the kernel's words.
                print('boot %2d %-6s %-6s %6.1f s  %s' % (
                    i, name, 'up' if ok else 'FAILED', seconds,
                    (verdict or '-') if ok else why), flush=True)
    finally:
        stop_load(load)
    for name, _ in configs:
        t = times[name]
        print('%s: up %d of %d, failed %d%s' % (
            name, len(t), args.boots, failed[name],
            '; time to up: min %.1f s, median %.1f s, max %.1f s'
            % (min(t), statistics.median(t), max(t)) if t else ''))
    return 1 if failed.get('after') else 0


if __name__ == '__main__':
    sys.exit(main())
