"""A fake host in a temporary directory: /proc, /sys/devices/system/{cpu,
node} and a cgroup v1 tree (cpuset, memory), behaving like the kernel
where the agent relies on it:

* writing a pid to a group's ``cgroup.procs`` moves the process (ESRCH if
  it does not exist) and rewrites every ``cgroup.procs`` and the
  process's /proc/PID/cgroup;
* a cpuset group refuses tasks until cpuset.mems and cpuset.cpus are set;
* a group with processes cannot be removed (EBUSY);
* ``sched_setaffinity`` is recorded, never run (fake pids may be real
  pids of this machine);
* interrupts (``irq``): writing ``/proc/irq/N/smp_affinity_list`` sets
  it and ``effective_affinity_list``; a managed one refuses with EIO, a
  set without an online CPU with EINVAL; a write anywhere outside the
  fake tree fails the test;
* the unbound workqueue mask (``workqueue``) takes a hex mask, or
  refuses with EINVAL (``reject_workqueue``, or no online CPU in it);
* guests (``guest``): libvirt's pid file and ``CPU n/KVM`` threads with
  their ``Cpus_allowed_list``;
* irqbalance (``irqbalance``): a process and a real unix socket that
  answers ``setup`` and takes ``settings cpus`` as irqbalance 1.9 does.
"""

import errno
import os
import shutil
import socket
import threading

import fixtures

from nova_pinning_hooks.host import procfs

V1 = 'nova_pinning_hooks.isolation.cgroupv1.'
ISO = 'nova_pinning_hooks.isolation.'


def put(path, text):
    # Atomic, as the kernel's files read: the agent's threads read these
    # while the fake rewrites them (a torn read made tests flaky).
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = '%s.fake-%d' % (path, threading.get_ident())
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, path)


def get(path):
    with open(path) as f:
        return f.read().strip()


class FakeHost(fixtures.Fixture):

    def __init__(self, cpus='0-3', nodes='0', mem_kib=16 * 1024 * 1024):
        super().__init__()
        self.cpus, self.nodes, self.mem_kib = cpus, nodes, mem_kib

    def _setUp(self):
        from nova_pinning_hooks.isolation import config
        self.top = self.useFixture(fixtures.TempDir()).path
        j = os.path.join
        self.paths = config.HostPaths(
            proc=j(self.top, 'proc'), cpu_sysfs=j(self.top, 'cpu'),
            node_sysfs=j(self.top, 'node'),
            systemd_run=j(self.top, 'run-systemd'),
            workqueue_mask=j(self.top, 'workqueue', 'cpumask'),
            qemu_run=j(self.top, 'run-qemu'),
            irqbalance_run=j(self.top, 'run-irqbalance'),
            system_bus=j(self.top, 'run-dbus', 'system_bus_socket'),
            systemd_private=j(self.top, 'run-systemd', 'private'))
        self.cgroot = j(self.top, 'cgroup')
        self.roots = {'cpuset': j(self.cgroot, 'cpuset'),
                      'memory': j(self.cgroot, 'memory')}
        put(j(self.paths.cpu_sysfs, 'online'), self.cpus + '\n')
        put(j(self.paths.node_sysfs, 'online'), self.nodes + '\n')
        put(j(self.paths.proc, 'stat'), 'cpu 1 2 3\nbtime 1000\n')
        put(j(self.paths.proc, 'meminfo'), 'MemTotal: %d kB\n'
            % self.mem_kib)
        cs = self.roots['cpuset']
        for name, value in (('cpuset.cpus', self.cpus),
                            ('cpuset.effective_cpus', self.cpus),
                            ('cpuset.mems', self.nodes)):
            put(j(cs, name), value + '\n')
            put(j(cs, 'machine', name), value + '\n')
        put(j(self.roots['memory'], 'memory.limit_in_bytes'),
            '9223372036854771712\n')
        self.where = {}      # pid -> {controller: path}
        self.writes = []     # (path, value) written through the agent
        self.affinity = []   # (tid, cpus) set through the agent
        self.useFixture(fixtures.MonkeyPatch(V1 + '_write', self._write))
        self.useFixture(fixtures.MonkeyPatch(V1 + '_rmdir', self._rmdir))
        self.useFixture(fixtures.MonkeyPatch(
            V1 + '_set_affinity', lambda tid, cpus:
            self.affinity.append((tid, frozenset(cpus)))))
        self.managed = set()          # interrupts that refuse writes
        self.reject_workqueue = False
        self.irq_writes = []          # (irq, text)
        self.useFixture(fixtures.MonkeyPatch(
            ISO + 'kernel.interrupts._write', self._write_irq))
        self.useFixture(fixtures.MonkeyPatch(
            ISO + 'kernel.workqueue._write', self._write_workqueue))
        self._sync()

    # -- the kernel -------------------------------------------------------

    def _controller(self, path):
        for name, root in self.roots.items():
            if path == root or path.startswith(root + os.sep):
                rel = os.path.relpath(path, root)
                return name, '/' if rel == '.' else '/' + rel
        raise AssertionError('write outside the fake cgroup tree: %s'
                             % path)

    def _write(self, path, value):
        self.writes.append((path, value))
        if os.path.basename(path) != 'cgroup.procs':
            if os.path.basename(path) == 'cpuset.cpus':
                put(os.path.join(os.path.dirname(path),
                                 'cpuset.effective_cpus'), value)
            put(path, value)
            return
        pid = int(value)
        if pid not in self.where:
            raise ProcessLookupError(errno.ESRCH, 'No such process')
        d = os.path.dirname(path)
        controller, group = self._controller(d)
        if controller == 'cpuset' and group != '/' and not (
                self._value(d, 'cpuset.mems') and
                self._value(d, 'cpuset.cpus')):
            raise OSError(errno.ENOSPC, 'No space left on device')
        self.where[pid][controller] = group
        self._sync()

    @staticmethod
    def _value(d, name):
        try:
            return get(os.path.join(d, name))
        except OSError:
            return ''

    def _rmdir(self, path):
        if self._value(path, 'cgroup.procs'):
            raise OSError(errno.EBUSY, 'Device or resource busy')
        shutil.rmtree(path)

    def _sync(self):
        members = {}
        for pid, groups in self.where.items():
            for controller, path in groups.items():
                members.setdefault((controller, path), []).append(str(pid))
            put(os.path.join(self.paths.proc, str(pid), 'cgroup'),
                '4:memory:%s\n3:cpuset:%s\n1:name=systemd:/\n0::/\n'
                % (groups['memory'], groups['cpuset']))
        for controller, root in self.roots.items():
            for d, _, _ in os.walk(root):
                rel = os.path.relpath(d, root)
                path = '/' if rel == '.' else '/' + rel
                put(os.path.join(d, 'cgroup.procs'), '\n'.join(
                    sorted(members.get((controller, path), []), key=int)))

    # -- processes ------------------------------------------------------

    def spawn(self, pid, comm, ppid=1, flags=0, start=100, cgroup='/',
              memory='/', state='S', threads=None, affinity=None):
        """A process; ``threads``: {tid: cpuset path} of extra threads;
        ``affinity``: {tid: CPU set text} (Cpus_allowed_list)."""
        d = os.path.join(self.paths.proc, str(pid))
        if os.path.isdir(d):
            shutil.rmtree(d)
        fields = [state, str(ppid)] + ['0'] * 4 + [str(flags)] + \
            ['0'] * 12 + [str(start)] + ['0'] * 10
        put(os.path.join(d, 'stat'), '%d (%s) %s\n'
            % (pid, comm, ' '.join(fields)))
        put(os.path.join(d, 'cmdline'), comm + '\0')
        for tid, path in (threads or {}).items():
            put(os.path.join(d, 'task', str(tid), 'cgroup'),
                '3:cpuset:%s\n' % path)
        for tid, cpus in (affinity or {}).items():
            put(os.path.join(d, 'task', str(tid), 'status'),
                'Name:\t%s\nCpus_allowed_list:\t%s\n' % (comm, cpus))
        self.where[pid] = {'cpuset': cgroup, 'memory': memory}
        d = os.path.join(self.roots['cpuset'], cgroup.lstrip('/'))
        if not os.path.isdir(d):
            for name, value in (('cpuset.cpus', self.cpus),
                                ('cpuset.effective_cpus', self.cpus),
                                ('cpuset.mems', self.nodes)):
                put(os.path.join(d, name), value)
        os.makedirs(os.path.join(self.roots['memory'], memory.lstrip('/')),
                    exist_ok=True)
        self._sync()

    def exit(self, pid):
        shutil.rmtree(os.path.join(self.paths.proc, str(pid)))
        del self.where[pid]
        self._sync()

    def cgroup(self, pid, controller='cpuset'):
        return procfs.cgroups(pid, self.paths.proc)[controller]

    def group_dir(self, name, controller='cpuset'):
        return os.path.join(self.roots[controller], name)

    def typical(self):
        """init, kernel threads, daemons, Open vSwitch, a guest."""
        self.spawn(1, 'init', ppid=0)
        self.spawn(2, 'kthreadd', ppid=0)
        self.spawn(10, 'kworker/0:1', ppid=2)
        self.spawn(11, 'odd-kthread', ppid=1, flags=procfs.PF_KTHREAD)
        self.spawn(100, 'sshd')
        self.spawn(101, 'rsyslogd', cgroup='/system/rsyslog')
        self.spawn(102, 'ovs-vswitchd')
        self.spawn(103, 'qemu-system-x86', cgroup='/machine/qemu-1-g1',
                   memory='/machine/qemu-1-g1')
        self.spawn(104, 'nova-compute')
        self.spawn(105, 'defunct', state='Z')

    # -- interrupts, workqueues, guests, irqbalance -------------------------

    def _inside(self, path):
        if not os.path.abspath(path).startswith(self.top + os.sep):
            raise AssertionError('write outside the fake host: %s' % path)

    def irq(self, n, cpus, managed=False):
        d = os.path.join(self.paths.proc, 'irq', str(n))
        for name in ('smp_affinity_list', 'effective_affinity_list'):
            put(os.path.join(d, name), cpus + '\n')
        if managed:
            self.managed.add(n)

    def irq_cpus(self, n, name='smp_affinity_list'):
        return get(os.path.join(self.paths.proc, 'irq', str(n), name))

    def _write_irq(self, path, value):
        from nova_pinning_hooks.engine import cpuset
        self._inside(path)
        n = int(os.path.basename(os.path.dirname(path)))
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, 'No such file')
        if n in self.managed:
            raise OSError(errno.EIO, 'Input/output error')
        online = cpuset.parse(self.cpus)
        if not cpuset.parse(value) & online:
            raise OSError(errno.EINVAL, 'Invalid argument')
        self.irq_writes.append((n, value))
        self.irq(n, value)

    def interrupts(self, table):
        """/proc/interrupts from ``{irq: {cpu: count}}``."""
        from nova_pinning_hooks.engine import cpuset
        cpus = sorted(cpuset.parse(self.cpus))
        lines = [' ' * 4 + ''.join('%11s' % ('CPU%d' % c) for c in cpus)]
        for irq, by_cpu in sorted(table.items()):
            lines.append('%4d:' % irq + ''.join(
                '%11d' % by_cpu.get(c, 0) for c in cpus) +
                '  PCI-MSI 1-edge  virtio%d' % irq)
        lines.append(' LOC:' + ''.join('%11d' % 5 for _ in cpus) +
                     '   Local timer interrupts')
        put(os.path.join(self.paths.proc, 'interrupts'),
            '\n'.join(lines) + '\n')

    def workqueue(self, mask):
        put(self.paths.workqueue_mask, mask + '\n')

    def get_workqueue(self):
        return get(self.paths.workqueue_mask)

    def _write_workqueue(self, path, value):
        from nova_pinning_hooks.engine import cpuset
        from nova_pinning_hooks.engine import cpumask
        self._inside(path)
        if self.reject_workqueue or not cpumask.parse(value) & \
                cpuset.parse(self.cpus):
            raise OSError(errno.EINVAL, 'Invalid argument')
        self.workqueue(value)

    def guest(self, name, pid, vcpus, start=500):
        """A running guest: ``vcpus`` {vCPU: CPU set text}."""
        put(os.path.join(self.paths.qemu_run, name + '.pid'), str(pid))
        self.spawn(pid, 'qemu-system-x86', start=start,
                   cgroup='/machine/' + name,
                   affinity={pid + 1 + v: cpus for v, cpus in
                             vcpus.items()})
        for v in vcpus:
            put(os.path.join(self.paths.proc, str(pid), 'task',
                             str(pid + 1 + v), 'comm'), 'CPU %d/KVM\n' % v)

    def irqbalance(self, pid=700, banned=''):
        """A running irqbalance with its socket; returns its fake."""
        self.spawn(pid, 'irqbalance')
        fake = FakeIrqbalance(os.path.join(
            self.paths.irqbalance_run, 'irqbalance%d.sock' % pid), banned)
        self.addCleanup(fake.stop)
        return fake


class FakeIrqbalance:
    """irqbalance 1.9's socket: ``setup`` and ``settings cpus``, only
    from a client that sends its credentials."""

    def __init__(self, path, banned=''):
        from nova_pinning_hooks.engine import cpuset
        self.path = path
        self.own = cpuset.parse(banned, allow_empty=True)
        self.banned = self.own
        self.messages = []
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        from nova_pinning_hooks.engine import cpuset
        from nova_pinning_hooks.engine import cpumask
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
                data, anc, _, _ = conn.recvmsg(500, socket.CMSG_SPACE(12))
                if not any(level == socket.SOL_SOCKET and
                           kind == socket.SCM_CREDENTIALS
                           for level, kind, _ in anc):
                    self.messages.append(('no credentials', data))
                    continue
                text = data.decode()
                self.messages.append(text)
                if text == 'setup':
                    conn.sendall(('SLEEP 10 BANNED %s' % cpumask.format(
                        self.banned)).encode())
                elif text.startswith('settings cpus '):
                    arg = text[len('settings cpus '):]
                    self.banned = self.own if arg == 'NULL' else \
                        cpuset.parse(arg)

    def heard(self, count, timeout=5.0):
        """The messages once there are ``count`` (a message that wants
        no answer is served after the client has gone)."""
        import time
        deadline = time.monotonic() + timeout
        while len(self.messages) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return list(self.messages)

    def stop(self):
        """irqbalance exits: its socket goes with it."""
        if self.running:
            self.running = False
            self.thread.join(5)
            self.sock.close()
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
