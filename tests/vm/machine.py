"""A real 2-socket SMT compute host, booted as a qemu VM, for the VM tests.

The image (``tools/vm-image.sh``) is Debian 12 with systemd as pid 1,
the unified cgroup v2 hierarchy, libvirt and qemu. ``Machine`` boots a
copy-on-write overlay of it under TCG (no KVM needed) with the shape of
today's compute hosts, scaled down: 2 sockets = 2 NUMA nodes, each of 2
cores x 2 threads (CPUs 0-3 on node 0, 4-7 on node 1; SMT siblings 0-1,
2-3, 4-5, 6-7), 1.5 GiB of memory per node.

Invariants:

- Everything is driven through qemu-guest-agent on a virtio-serial port
  (``guest-exec`` with captured output), never through the serial
  console: once serial-getty starts it hangs the tty up, and writes from
  the guest stop arriving. The console only goes to a file, for reading
  after a failure.
- Every wait has a time bound; a command that outlives its bound is an
  error naming the command, and the VM is killed on ``stop()``.
- The image itself is never written: each VM has its own overlay, which
  survives ``reboot()`` (a cold one: power off, a new qemu on the same
  overlay) and is thrown away with the work directory.
- The package is installed in the VM from this checkout at every boot
  (``install_package``): a read-only second disk holding the files git
  tracks and the package's wheel built from them on this host, ``pip
  install`` of that wheel without network or index.
- After ``start_zygote()``, ``nova-pinning`` and ``nova-pinning-isolate``
  command lines run through ``tests/vm/zygote.py`` (a fresh forked
  process each, the imports done once), started again after a reboot;
  every other command, and those with standard input, start as
  processes.
"""

import base64
import ctypes
import json
import mmap
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from tests.vm import vmdiag

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
IMAGE_TOOL = os.path.join(TOP, 'tools', 'vm-image.sh')
QEMU = '/usr/bin/qemu-system-x86_64'

# The host's shape: what tests may rely on.
NODES = {0: frozenset(range(0, 4)), 1: frozenset(range(4, 8))}
SIBLINGS = [frozenset((c, c + 1)) for c in range(0, 8, 2)]
CPUS = frozenset(range(8))
# tests/vm/zygote.py in the VM (the checkout is copied to /root/nph).
ZYGOTE = '/root/nph/tests/vm/zygote.py'
ZYGOTE_SOCKET = '/run/nph-vm-zygote.sock'
ZYGOTE_SCRIPTS = ('nova-pinning', 'nova-pinning-isolate')


class VMError(Exception):
    pass


class BootError(VMError):
    """The VM did not come up: ``str()`` is one line that says why
    (tests/vm/vmdiag.py); ``console`` the end of its console."""

    def __init__(self, line, console=''):
        super().__init__(line)
        self.console = console


class Result:

    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err

    def __repr__(self):
        return 'Result(%r, rc=%r, out=%r, err=%r)' % (
            self.argv, self.rc, self.out[-2000:], self.err[-2000:])


def image_dir(timeout=1800):
    """The image directory, built on first use (``tools/vm-image.sh``)."""
    proc = subprocess.run([IMAGE_TOOL], capture_output=True, text=True,
                          timeout=timeout, check=False)
    if proc.returncode:
        raise VMError('tools/vm-image.sh failed: %s' % proc.stderr[-3000:])
    return proc.stdout.strip().splitlines()[-1]


def _source_disk(path):
    """An ext4 image of the files git tracks in this checkout (and the
    changes in the work tree, as a developer runs the tests)."""
    tree = tempfile.mkdtemp(prefix='nph-vm-src.')
    try:
        files = subprocess.run(
            ['git', '-C', TOP, 'ls-files', '-z', '--cached', '--others',
             '--exclude-standard'],
            capture_output=True, check=True, timeout=60).stdout
        for name in files.decode().split('\0'):
            if not name or not os.path.isfile(os.path.join(TOP, name)):
                continue
            dest = os.path.join(tree, 'src', name)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(os.path.join(TOP, name), dest)
        # The package as a wheel, built here: pip building it inside the
        # TCG VM took 54 s of every run; installing a wheel only unpacks.
        subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--quiet',
                        '--no-deps', '-w', os.path.join(tree, 'wheel'), TOP],
                       check=True, timeout=300, capture_output=True)
        with open(path, 'wb') as f:
            f.truncate(256 << 20)
        subprocess.run(['mkfs.ext4', '-q', '-L', 'nph-src', '-d', tree,
                        path], check=True, timeout=120)
    finally:
        shutil.rmtree(tree, ignore_errors=True)


class Agent:
    """A client of qemu-guest-agent over qemu's UNIX socket chardev."""

    def __init__(self, path):
        self.path = path
        self.sock = None
        self.buf = b''

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.buf = b''

    def _readline(self, deadline):
        while b'\n' not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError('guest agent: no answer')
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                continue
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError('guest agent socket closed')
            self.buf += chunk
        line, self.buf = self.buf.split(b'\n', 1)
        return line

    def sync(self, timeout):
        """Connect if needed and flush anything stale: guest-sync with a
        fresh id, answers to earlier requests are dropped."""
        deadline = time.monotonic() + timeout
        if self.sock is None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(self.path)
        token = int.from_bytes(os.urandom(4), 'big')
        # 0xff resets the agent's parser after a half-written request.
        self.sock.sendall(b'\xff' + json.dumps(
            {'execute': 'guest-sync', 'arguments': {'id': token}}).encode())
        while True:
            line = self._readline(deadline).strip(b'\xff \r')
            if not line:
                continue
            try:
                if json.loads(line).get('return') == token:
                    return
            except ValueError:
                continue

    def call(self, command, timeout=30, **arguments):
        self.sync(timeout)
        request = {'execute': command}
        if arguments:
            request['arguments'] = arguments
        self.sock.sendall(json.dumps(request).encode())
        deadline = time.monotonic() + timeout
        while True:
            line = self._readline(deadline).strip()
            if not line:
                continue
            answer = json.loads(line)
            if 'error' in answer:
                raise VMError('guest agent: %s: %s' % (
                    command, answer['error'].get('desc')))
            if 'return' in answer:
                return answer['return']


# The VM's kernel command line. Under TCG the guest's vCPUs are threads
# of a qemu that shares a loaded 2-CPU host with other stages, so the
# guest kernel's own time-based checks see starved CPUs and act on it; a
# test host needs none of them:
# - tsc_early_khz (added by Machine when host_tsc_khz() can tell it): the
#   guest's TSC frequency, so that the kernel does not measure it. TCG's
#   guest TSC is the host's (qemu reads the host's TSC for RDTSC); a guest
#   kernel that times it against the emulated PIT while its vCPUs are
#   descheduled gets it wrong (seen here beside a loaded host: "PIT
#   calibration deviates from HPET: 124958 2596141", "Detected 124.958
#   MHz": the guest's clock ran 20.8 times too fast, every timeout and
#   watchdog fired 20 times too soon, RCU stalls and soft lockups
#   followed, and the VM never came up);
# - no_timer_check: the IO-APIC timer check at boot waits a few ticks
#   and panics when they do not come ("IO-APIC + timer doesn't work!",
#   seen here beside a busy host);
# - tsc=reliable: TCG's guest TSC is the host's invariant TSC, so the
#   clocksource watchdog can only mark it unstable because a vCPU was
#   descheduled between two reads, and its switch to another clocksource
#   is a stop_machine across all 8 vCPUs (CI's VM locked up in that
#   rendezvous, "soft lockup ... multi_cpu_stop");
# - nokaslr: the kernel at the addresses of its System.map, so a VM that
#   does not come up says where its vCPUs are (vmdiag.vcpu_places).
KERNEL_ARGS = ('root=/dev/vda', 'rw', 'console=ttyS0', 'mitigations=off',
               'systemd.unified_cgroup_hierarchy=1', 'no_timer_check',
               'tsc=reliable', 'nokaslr')


def host_tsc_khz(seconds=0.5):
    """The host's TSC frequency in kHz, measured against CLOCK_MONOTONIC
    (RDTSC run from an executable page through ctypes; each end of the
    interval the tightest of 50 paired reads, so a descheduled read
    costs nothing); None where that cannot run (not x86_64, no
    executable mapping) or the result is absurd."""
    if os.uname().machine != 'x86_64':
        return None
    # rdtsc; shl rdx, 32; or rax, rdx; ret
    code = bytes.fromhex('0f3148c1e2204809d0c3')
    try:
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ |
                         mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, ValueError):
        return None
    try:
        page.write(code)
        buf = ctypes.c_char.from_buffer(page)
        rdtsc = ctypes.CFUNCTYPE(ctypes.c_uint64)(ctypes.addressof(buf))

        def pair(read):
            best = None
            for _ in range(50):
                t0 = time.monotonic_ns()
                tsc = read()
                t1 = time.monotonic_ns()
                if best is None or t1 - t0 < best[0]:
                    best = (t1 - t0, (t0 + t1) // 2, tsc)
            return best[1], best[2]

        ns0, tsc0 = pair(rdtsc)
        time.sleep(seconds)
        ns1, tsc1 = pair(rdtsc)
        del rdtsc, buf
    finally:
        try:
            page.close()
        except BufferError:
            pass
    khz = round((tsc1 - tsc0) * 1e6 / (ns1 - ns0))
    return khz if 100_000 <= khz <= 20_000_000 else None


PANIC = 'Kernel panic - not syncing'

# The VM's scheduling priority on the host (nice), set before qemu starts
# so that every qemu thread has it: one TCG thread runs all 8 vCPUs, and
# at the default priority it got 8 % of the host beside the stages that
# run with it (boots of 580 s), where eight vCPU threads used to take a
# share each. At -10 it weighs as nine ordinary threads: at most the one
# host CPU it can use, the other left to the stages beside it.
NICE = -10


def _vm_priority():
    os.nice(NICE)


class Machine:

    def __init__(self, image=None, workdir=None, smp_per_node=4,
                 mib_per_node=1536):
        self.image = image or image_dir()
        self.workdir = workdir or tempfile.mkdtemp(prefix='nph-vm.')
        self.zygote = False  # start_zygote()
        self.smp_per_node = smp_per_node
        self.mib_per_node = mib_per_node
        self.qemu = None
        self.agent = Agent(os.path.join(self.workdir, 'qga.sock'))
        self.console = os.path.join(self.workdir, 'console.log')
        self.qmp_path = os.path.join(self.workdir, 'qmp.sock')
        self.boot_id = None
        self.boot_seconds = []
        self.kernel_args = KERNEL_ARGS
        self.tsc_khz = host_tsc_khz()
        if self.tsc_khz:
            self.kernel_args += ('tsc_early_khz=%d' % self.tsc_khz,)

    # -- life cycle ---------------------------------------------------

    def _argv(self):
        n = self.smp_per_node
        mib = self.mib_per_node
        argv = [QEMU, '-nodefaults', '-display', 'none', '-machine', 'q35',
                '-accel', 'tcg,thread=single', '-cpu', 'Skylake-Server-v4',
                '-m', str(2 * mib),
                '-smp', '%d,sockets=2,cores=%d,threads=2' % (2 * n, n // 2)]
        for node in (0, 1):
            argv += ['-object', 'memory-backend-ram,id=m%d,size=%dM'
                     % (node, mib),
                     '-numa', 'node,nodeid=%d,cpus=%d-%d,memdev=m%d'
                     % (node, node * n, node * n + n - 1, node)]
        argv += ['-kernel', os.path.join(self.image, 'vmlinuz'),
                 '-initrd', os.path.join(self.image, 'initrd.img'),
                 '-append', ' '.join(self.kernel_args),
                 '-drive', 'file=%s,if=virtio,format=qcow2'
                 % os.path.join(self.workdir, 'root.qcow2'),
                 '-drive', 'file=%s,if=virtio,format=raw,readonly=on'
                 % os.path.join(self.workdir, 'src.img'),
                 '-device', 'virtio-serial',
                 '-chardev', 'socket,id=qga0,server=on,wait=off,path=%s'
                 % self.agent.path,
                 '-device', 'virtserialport,chardev=qga0,'
                            'name=org.qemu.guest_agent.0',
                 '-serial', 'file:%s' % self.console,
                 # QMP, for a boot that did not come up: where each vCPU
                 # is (vcpu_states), read before the VM is killed.
                 '-qmp', 'unix:%s,server=on,wait=off' % self.qmp_path,
                 '-net', 'none']
        return argv

    def boot(self, timeout=600, source=True):
        """Boot a fresh overlay of the image; ``source``: with the
        checkout's disk (``install_package`` needs it), else an empty
        one (benchmarks/vm_boot_load.py boots only)."""
        subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2', '-F',
                        'raw', '-b', os.path.join(self.image, 'disk.img'),
                        os.path.join(self.workdir, 'root.qcow2')],
                       check=True, timeout=60)
        src = os.path.join(self.workdir, 'src.img')
        if source:
            _source_disk(src)
        else:
            with open(src, 'wb') as f:
                f.truncate(1 << 20)
        start = time.monotonic()
        self._start()
        self._wait_up(timeout, previous_boot=None)
        self.boot_seconds.append(time.monotonic() - start)
        self._log_command(['(boot)'], 0, self.boot_seconds[-1])

    def _start(self):
        with open(os.path.join(self.workdir, 'qemu.log'), 'ab') as log:
            self.qemu = subprocess.Popen(
                self._argv(), stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, preexec_fn=_vm_priority)

    def _wait_up(self, timeout, previous_boot):
        """Wait until the guest agent answers in a boot other than
        ``previous_boot`` and systemd has finished starting up."""
        deadline = time.monotonic() + timeout
        while True:
            if self.qemu.poll() is not None:
                raise self._boot_error('qemu exited with %s'
                                       % self.qemu.returncode)
            if time.monotonic() > deadline:
                raise self._boot_error('the VM did not come up in %d s'
                                       % timeout)
            if PANIC in self.console_text()[-65536:]:
                # It will not come up: say so now, not at the deadline.
                raise self._boot_error('the VM\'s kernel panicked')
            try:
                boot_id = self.read('/proc/sys/kernel/random/boot_id',
                                    timeout=20).strip()
            except (OSError, VMError, ValueError, TimeoutError):
                self.agent.close()
                time.sleep(2)
                continue
            if boot_id == previous_boot:
                time.sleep(2)
                continue
            self.boot_id = boot_id
            break
        left = max(10, deadline - time.monotonic())
        # is-system-running --wait returns once start-up is over
        # (running, or degraded when some unit failed: both will do).
        self.run(['systemctl', 'is-system-running', '--wait'],
                 timeout=left, check=False)

    def _boot_error(self, what):
        """A BootError whose line says why: the kernel's words, where
        the vCPUs are (read while qemu still runs), the host's load."""
        text = self.console_text()
        parts = [what, vmdiag.console_verdict(text, self.tsc_khz)]
        if self.qemu is not None and self.qemu.poll() is None:
            parts.append(vmdiag.vcpu_places(self.qmp_path))
        parts.append(vmdiag.host_load())
        last = vmdiag.console_last(text)
        parts.append('console ends: %s' % last if last else
                     'the console is empty')
        return BootError('; '.join(p for p in parts if p),
                         console=self.tail())

    def reboot(self, timeout=600):
        """A cold reboot: the guest powers off, and a new qemu boots the
        same disk (a reboot inside one TCG qemu was seen to take minutes
        on a loaded machine). The guest sees a reboot: a new boot id,
        nothing of the runtime state, the disk as it was left."""
        previous = self.boot_id
        start = time.monotonic()
        zygote, self.zygote = self.zygote, False  # gone with the old /run
        self.stop()
        self._start()
        self._wait_up(timeout, previous_boot=previous)
        self.boot_seconds.append(time.monotonic() - start)
        self._log_command(['(reboot)'], 0, self.boot_seconds[-1])
        if zygote:
            self.start_zygote()

    def stop(self, timeout=120):
        if self.qemu is None:
            return
        if self.qemu.poll() is None:
            try:
                self.agent.call('guest-shutdown', mode='powerdown',
                                timeout=10)
            except (OSError, TimeoutError, ConnectionError, VMError):
                pass
            try:
                self.qemu.wait(timeout)
            except subprocess.TimeoutExpired:
                self.qemu.kill()
                self.qemu.wait(30)
        self.agent.close()
        self.qemu = None

    def destroy(self):
        self.stop()
        if os.environ.get('NPH_VM_KEEP'):
            return
        shutil.rmtree(self.workdir, ignore_errors=True)

    def console_text(self):
        """The whole console so far ('' before the first boot)."""
        try:
            with open(self.console, 'rb') as f:
                return f.read().decode(errors='replace')
        except OSError:
            return ''

    def tail(self, lines=40):
        text = self.console_text()[-16384:]
        return '\n'.join(text.splitlines()[-lines:])

    # -- commands -----------------------------------------------------

    def run(self, argv, timeout=120, check=True, input=None, env=None):
        """Run ``argv`` in the VM (a list, or a string for ``sh -c``);
        a Result with its exit status and output."""
        if isinstance(argv, str):
            argv = ['/bin/sh', '-c', argv]
        logged = argv
        if self.zygote and input is None and argv[0] in ZYGOTE_SCRIPTS:
            # tests/vm/zygote.py: the same command, its imports done once.
            argv = ['python3', ZYGOTE, 'call'] + list(argv)
        args = {'path': argv[0], 'arg': list(argv[1:]),
                'capture-output': True}
        if input is not None:
            args['input-data'] = base64.b64encode(input.encode()).decode()
        if env:
            args['env'] = ['%s=%s' % kv for kv in sorted(env.items())]
        started = time.monotonic()
        pid = self.agent.call('guest-exec', **args)['pid']
        deadline = started + timeout
        delay = 0.05
        while True:
            status = self.agent.call('guest-exec-status', pid=pid)
            if status.get('exited'):
                break
            if time.monotonic() > deadline:
                self.run(['kill', '-9', str(pid)], timeout=20, check=False)
                raise VMError('%r did not end within %s s' % (argv, timeout))
            time.sleep(delay)
            delay = min(0.5, delay * 2)
        out = base64.b64decode(status.get('out-data', '')).decode(
            errors='replace')
        err = base64.b64decode(status.get('err-data', '')).decode(
            errors='replace')
        rc = status.get('exitcode', -status.get('signal', 0) or -1)
        result = Result(logged, rc, out, err)
        self._log_command(argv, rc, time.monotonic() - started)
        if check and rc != 0:
            raise VMError('command failed in the VM: %r' % result)
        return result

    def _log_command(self, argv, rc, seconds):
        """One line per command in ``commands.log`` (seconds, exit
        status, command): where a slow run's time went."""
        with open(os.path.join(self.workdir, 'commands.log'), 'a') as log:
            log.write('%7.2f %4s %s\n' % (seconds, rc,
                                          ' '.join(argv)[:200]))

    def read(self, path, timeout=30):
        return self.run(['cat', path], timeout=timeout).out

    def write(self, path, text, mode='0644'):
        self.run(['/bin/sh', '-c', 'umask 077; cat > "$1"; chmod %s "$1"'
                  % mode, 'write', path], input=text)

    def start_zygote(self, timeout=300):
        """tests/vm/zygote.py's server, as a transient unit: from now on
        the package's commands run through it (``reboot`` starts it
        again). NPH_VM_ZYGOTE=0: never."""
        if os.environ.get('NPH_VM_ZYGOTE') == '0':
            return
        self.run(['systemd-run', '--unit', 'nph-vm-zygote', '--collect',
                  'python3', ZYGOTE, 'serve'])
        deadline = time.monotonic() + timeout
        while self.run(['test', '-S', ZYGOTE_SOCKET], check=False).rc:
            if time.monotonic() > deadline:
                raise VMError('the zygote did not start within %s s'
                              % timeout)
            time.sleep(1)
        self.zygote = True

    def install_package(self):
        """pip-install this checkout into the VM's system Python, with
        the dependencies the image brings from Debian's packages."""
        self.run('mkdir -p /mnt/nph-src && '
                 'mount -o ro /dev/vdb /mnt/nph-src && '
                 'rm -rf /root/nph /root/nph-wheel && '
                 'cp -a /mnt/nph-src/src /root/nph && '
                 'cp -a /mnt/nph-src/wheel /root/nph-wheel && '
                 'umount /mnt/nph-src', timeout=120)
        return self.run('pip install --quiet --no-index --no-deps '
                        '--break-system-packages /root/nph-wheel/*.whl',
                        env={'PATH': '/usr/local/sbin:/usr/local/bin:'
                                     '/usr/sbin:/usr/bin:/sbin:/bin',
                             'HOME': '/root'},
                        timeout=600)
