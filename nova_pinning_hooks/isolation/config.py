"""The isolation's configuration edge, and its checks before anything is
touched.

``read(conf)`` is the one place in ``isolation`` that looks into an
oslo.config object: it reads ``[nova_pinning] reserved_cpus`` and
``overcommit_file`` and every ``[nova_pinning_isolation]`` option once
into ``Options``, a frozen record, unchecked (it reads nothing else, and
never fails on a configuration oslo.config accepted). Every module below
is handed ``Options`` or the ``Settings`` checked from it, never
``conf``: ``undo`` and ``status`` work from ``Options`` alone when the
settings are refused.

``load(options)`` turns ``Options`` into ``Settings``, or raises
``ConfigError`` with one message. It only reads (sysfs, /proc, the
overcommit file); a refused configuration has changed nothing.

Invariants: ``Options`` has a field for every ``[nova_pinning_isolation]``
option, of the option's name (``tests/unit/isolation/test_config.py``
checks it against ``nova_pinning_hooks.conf.isolation_opts``); what a
process read at its start is what it uses (the record is frozen).

Refused: reserved CPUs unset, empty, unparsable, not online, or every
online CPU (no CPU left for guests); reserved CPUs overlapping nova's
``cpu_shared_set`` / ``cpu_dedicated_set`` (from the overcommit file),
or an overcommit file that cannot tell them (stale, unusable);
memory nodes not online; a memory limit too small for the host's daemons
or beyond the host's memory; a group or unit name that is not a plain
name; ``machine.slice`` (the guests) among the confined units; a mode
whose cgroup hierarchy is missing; systemd with neither systemctl on
PATH nor a D-Bus socket of systemd's (``systemd_access``).
"""

import dataclasses
import os
import re
import shutil
import stat
import typing

from oslo_config import cfg
from oslo_log import log as logging

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.isolation import classify
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation import systemdbus

LOG = logging.getLogger(__name__)

# Below this the kernel would OOM-kill host daemons (nova-compute and
# libvirtd alone use a few hundred MiB).
MIN_MEMORY_LIMIT_MIB = 256
_GROUP_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')
_UNIT_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9:_.\\@-]*\.(slice|scope)$')


class ConfigError(Exception):
    """The configuration is refused; nothing was changed."""


class HostPaths(typing.NamedTuple):
    """Where the host is read; tests point these into a temporary tree."""
    proc: str = '/proc'
    cpu_sysfs: str = '/sys/devices/system/cpu'
    node_sysfs: str = '/sys/devices/system/node'
    systemd_run: str = '/run/systemd/system'
    workqueue_mask: str = '/sys/devices/virtual/workqueue/cpumask'
    qemu_run: str = '/run/libvirt/qemu'  # libvirt's qemu pid files
    irqbalance_run: str = '/run/irqbalance'
    system_bus: str = systemdbus.SOCKET  # D-Bus, where systemctl is not
    systemd_private: str = systemdbus.PRIVATE  # systemd's own, first


HOST = HostPaths()  # the real host

# nova's (cpu_shared_set, cpu_dedicated_set) as CPU set texts, None: unset
NovaSets = tuple[typing.Optional[str], typing.Optional[str]]


@dataclasses.dataclass(frozen=True)
class Options:
    """The options the isolation reads, as configured: not checked
    against the host (``load`` does that), each named as its option."""

    # [nova_pinning]
    reserved_cpus: typing.Optional[str]  # CPU set text; None: unset
    overcommit_file: typing.Optional[str]  # nova's CPU sets; None: unset
    # [nova_pinning_isolation]
    cgroup_mode: str                     # state.CgroupMode
    cgroup_root: str
    group_name: str
    memory_limit_mib: typing.Optional[int]
    memory_nodes: typing.Optional[str]   # node set text; None: unset
    exclude_process_names: tuple[str, ...]
    pidfile_dirs: tuple[str, ...]
    sweep_interval: int
    status_timeout: float
    slices: tuple[str, ...]
    move_from_groups: tuple[str, ...]
    only_descendants_of: typing.Optional[int]
    interrupts: bool
    workqueues: bool
    interrupt_sample_seconds: float
    state_file: str


def read(conf: cfg.ConfigOpts) -> Options:
    """``Options`` from ``conf``, read once (the module doc)."""
    pinning = conf.nova_pinning
    opts = conf.nova_pinning_isolation
    return Options(
        reserved_cpus=pinning.reserved_cpus,
        overcommit_file=pinning.overcommit_file,
        cgroup_mode=opts.cgroup_mode,
        cgroup_root=opts.cgroup_root,
        group_name=opts.group_name,
        memory_limit_mib=opts.memory_limit_mib,
        memory_nodes=opts.memory_nodes,
        # oslo.config gives lists; the record keeps what it read
        exclude_process_names=tuple(opts.exclude_process_names),
        pidfile_dirs=tuple(opts.pidfile_dirs),
        sweep_interval=opts.sweep_interval,
        status_timeout=opts.status_timeout,
        slices=tuple(opts.slices),
        move_from_groups=tuple(opts.move_from_groups),
        only_descendants_of=opts.only_descendants_of,
        interrupts=opts.interrupts,
        workqueues=opts.workqueues,
        interrupt_sample_seconds=opts.interrupt_sample_seconds,
        state_file=opts.state_file)


class Settings(typing.NamedTuple):
    mode: str                    # state.RECORDED
    cpus: frozenset[int]         # the reserved host CPUs
    mems: typing.Optional[frozenset[int]]  # memory nodes; None: unchanged
    cgroup_root: str
    group_name: str
    memory_limit_mib: typing.Optional[int]
    rules: classify.Rules
    pidfile_dirs: tuple[str, ...]
    sweep_interval: int
    slices: tuple[str, ...]
    state_file: str
    systemctl: typing.Optional[str]
    paths: HostPaths
    interrupts: bool = True      # keep interrupts off one-to-one CPUs
    workqueues: bool = True      # and unbound workqueues
    # systemd over D-Bus here (no systemctl)
    system_bus: typing.Optional[systemdbus.Sockets] = None


def _read_set(path: str, what: str) -> frozenset[int]:
    try:
        with open(path, encoding='ascii') as f:
            return cpuset.parse(f.read().strip())
    except (OSError, cpuset.CpusetError) as exc:
        raise ConfigError('cannot read the %s from %s: %s'
                          % (what, path, exc)) from None


def online_cpus(paths: HostPaths = HOST) -> frozenset[int]:
    return _read_set(os.path.join(paths.cpu_sysfs, 'online'), 'online CPUs')


def online_nodes(paths: HostPaths = HOST) -> frozenset[int]:
    path = os.path.join(paths.node_sysfs, 'online')
    if not os.path.exists(path):
        return frozenset([0])  # a kernel without NUMA: one node
    return _read_set(path, 'online memory nodes')


def _mem_total_mib(paths: HostPaths) -> typing.Optional[int]:
    try:
        with open(os.path.join(paths.proc, 'meminfo'),
                  encoding='ascii') as f:
            for line in f:
                if line.startswith('MemTotal:'):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reserved_cpus(options: Options, paths: HostPaths) -> frozenset[int]:
    text = options.reserved_cpus
    if not text or not text.strip():
        raise ConfigError('[nova_pinning] reserved_cpus is not set: there '
                          'are no host CPUs to confine host processes to')
    online = online_cpus(paths)
    try:
        cpus = cpuset.parse_optional(text, '[nova_pinning] reserved_cpus',
                                     known=online)
    except cpuset.CpusetError as exc:
        raise ConfigError(str(exc)) from None
    assert cpus is not None  # None only for an unset text, refused above
    if cpus >= online:
        raise ConfigError('[nova_pinning] reserved_cpus %s is every online '
                          'CPU: no CPU would be left for guests'
                          % cpuset.format(cpus))
    return cpus


def _nova_sets(overcommit_file: typing.Optional[str]
               ) -> typing.Optional[NovaSets]:
    """nova's (cpu_shared_set, cpu_dedicated_set) from the overcommit
    file; None where there is no nova (no file, none set aside).
    ConfigError where there is one that cannot be used (stale: set aside
    by a nova-compute that could not rewrite it; on a read-only
    filesystem; corrupt, a link...): nova's present CPU sets are not
    known then, and nothing is confined against sets nobody checked
    (issue 40, L-1: a stale file used to skip the check)."""
    path = overcommit_file
    if not path or not (os.path.lexists(path) or
                        os.path.lexists(overcommitfile.stale_path(path))):
        return None  # no nova here
    try:
        info = overcommitfile.read(path)
    except overcommitfile.OvercommitError as exc:
        raise ConfigError('cannot check [nova_pinning] reserved_cpus '
                          'against nova\'s CPU sets: %s' % exc) from None
    return info.shared_cpus, info.dedicated_cpus


def check_guest_overlap(overcommit_file: typing.Optional[str],
                        cpus: frozenset[int],
                        nova_sets: typing.Optional[NovaSets] = None
                        ) -> None:
    """ConfigError when ``cpus`` (the reserved CPUs) overlap nova's
    ``cpu_shared_set`` or ``cpu_dedicated_set`` (``nova_sets``, else
    ``overcommit_file`` read now), or when nova's sets cannot be known
    (``_nova_sets``). ``watch`` calls it again at every sweep."""
    if nova_sets is None:
        nova_sets = _nova_sets(overcommit_file)
    if nova_sets is None:
        return
    for name, text in zip(('cpu_shared_set', 'cpu_dedicated_set'),
                          nova_sets):
        guest = cpuset.parse(text) if text else frozenset()
        if cpus & guest:
            raise ConfigError(
                '[nova_pinning] reserved_cpus %s overlaps nova\'s %s (%s): '
                'host processes would share CPUs with guests'
                % (cpuset.format(cpus), name, cpuset.format(guest)))


def _memory_nodes(opts: Options,
                  paths: HostPaths) -> typing.Optional[frozenset[int]]:
    text = opts.memory_nodes
    if not text or not text.strip():
        return None
    what = '[nova_pinning_isolation] memory_nodes'
    try:
        nodes = cpuset.parse(text)
    except cpuset.CpusetError as exc:
        raise ConfigError('%s: %s' % (what, exc)) from None
    unknown = nodes - online_nodes(paths)
    if unknown:
        raise ConfigError('%s names memory nodes the host does not have '
                          'online: %s' % (what, cpuset.format(unknown)))
    return nodes


def _memory_limit(opts: Options,
                  paths: HostPaths) -> typing.Optional[int]:
    limit: typing.Optional[int] = opts.memory_limit_mib
    if not limit:
        return None
    if limit < MIN_MEMORY_LIMIT_MIB:
        raise ConfigError('[nova_pinning_isolation] memory_limit_mib %d is '
                          'below %d MiB: the kernel would kill host daemons'
                          % (limit, MIN_MEMORY_LIMIT_MIB))
    total = _mem_total_mib(paths)
    if total is not None and limit >= total:
        raise ConfigError('[nova_pinning_isolation] memory_limit_mib %d is '
                          'not below the host\'s memory (%d MiB)'
                          % (limit, total))
    return limit


def check_names(opts: Options) -> None:
    """Group, unit and path options are plain names / absolute paths."""
    if not _GROUP_NAME.match(opts.group_name or '') or \
            opts.group_name in classify.MACHINE_GROUPS:
        raise ConfigError('[nova_pinning_isolation] group_name %r must be '
                          'a plain cgroup name (letters, digits, ._-), not '
                          'machine' % opts.group_name)
    for unit in opts.slices:
        if not _UNIT_NAME.match(unit):
            raise ConfigError('[nova_pinning_isolation] slices: %r is not '
                              'a systemd slice or scope name' % unit)
        if unit == 'machine.slice' or unit.startswith('machine-'):
            raise ConfigError('[nova_pinning_isolation] slices: %s holds '
                              'the guests: it must not be confined to the '
                              'host CPUs' % unit)
    for path in opts.move_from_groups:
        if not path.startswith('/') or '..' in path.split('/'):
            raise ConfigError('[nova_pinning_isolation] move_from_groups: '
                              '%r is not an absolute cgroup path' % path)
    for path in opts.pidfile_dirs:
        if not os.path.isabs(path):
            raise ConfigError('[nova_pinning_isolation] pidfile_dirs: %r is '
                              'not an absolute path' % path)


def _check_v2_cpuset(root: str) -> None:
    """systemd applies ``AllowedCPUs=`` only through the cpuset controller
    of the unified (v2) hierarchy. systemd accepts the property whatever
    the hierarchy and reports success, so without this check ``apply``
    would say "confined" and confine nothing (seen with systemd 252 on a
    host whose cpuset controller is bound to cgroup v1)."""
    path = os.path.join(root, 'cgroup.controllers')
    try:
        with open(path, encoding='ascii') as f:
            controllers = f.read(4096).split()
    except OSError:
        raise ConfigError('cgroup_mode systemd: %s is not a unified cgroup '
                          'v2 hierarchy (no cgroup.controllers); systemd '
                          'does not apply AllowedCPUs= on a legacy or '
                          'hybrid hierarchy: use cgroup_mode v1' % root) \
            from None
    if 'cpuset' not in controllers:
        raise ConfigError('cgroup_mode systemd: the cpuset controller is not '
                          'available in the cgroup v2 hierarchy at %s (it '
                          'is bound to a cgroup v1 hierarchy, or disabled): '
                          'AllowedCPUs= would confine nothing' % root)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def systemd_access(paths: HostPaths = HOST
                   ) -> tuple[typing.Optional[str],
                              typing.Optional[systemdbus.Sockets]]:
    """``(systemctl path, None)`` or, without systemctl on PATH (kolla's
    images), ``(None, sockets)`` for systemd's D-Bus API: its own socket
    (``systemd_private``), else the system bus; ConfigError naming
    exactly what is missing when none is there."""
    systemctl = shutil.which('systemctl')
    if systemctl is not None:
        return systemctl, None
    if not _is_socket(paths.systemd_private) and \
            not _is_socket(paths.system_bus):
        raise ConfigError(
            'cgroup_mode systemd: no systemctl on PATH, no systemd socket '
            'at %s and no system bus at %s: mount the host\'s /run/systemd '
            '(or /run) into the container, or install systemctl'
            % (paths.systemd_private, paths.system_bus))
    missing = systemdbus.available()
    if missing:
        raise ConfigError(
            'cgroup_mode systemd: no systemctl on PATH, and the Python '
            'package jeepney, needed to reach systemd over D-Bus at %s, '
            'is not installed (%s): pip install jeepney, or apt install '
            'python3-jeepney' % (paths.systemd_private, missing))
    return None, systemdbus.Sockets(paths.system_bus, paths.systemd_private)


# cgroup v1 (``cgroup_mode v1``, and what ``auto`` resolves to on a v1
# or hybrid host) is deprecated since 1.1.0 and removed in 2.0.0:
# systemd 258 removed cgroup v1, and every platform nova 29 to 34 runs
# on boots cgroup v2. It keeps working, and tested, until then.
V1_DEPRECATED_IN = '1.1.0'
V1_REMOVED_IN = '2.0.0'


def mode_here(opts: Options, paths: HostPaths = HOST) -> str:
    """The mode the isolation runs in on this host: ``cgroup_mode``, or
    what ``auto`` resolves to; not checked (``resolve_mode`` checks)."""
    mode = opts.cgroup_mode
    if mode == state.CgroupMode.AUTO:
        unified = os.path.exists(os.path.join(opts.cgroup_root,
                                              'cgroup.controllers'))
        mode = (state.CgroupMode.SYSTEMD
                if unified and os.path.isdir(paths.systemd_run)
                else state.CgroupMode.V1)
    return mode


def resolve_mode(opts: Options, paths: HostPaths = HOST,
                 undo: bool = False
                 ) -> tuple[str, typing.Optional[str],
                            typing.Optional[systemdbus.Sockets]]:
    """``(mode, systemctl path, D-Bus sockets)`` (see ``systemd_access``;
    both None for v1); ConfigError if that mode cannot work here.
    ``undo``: only to put properties back, which works whether or not
    they ever took effect."""
    mode = mode_here(opts, paths)
    root = opts.cgroup_root
    if mode == state.CgroupMode.SYSTEMD:
        systemctl, bus = systemd_access(paths)
        if not undo:
            _check_v2_cpuset(root)
        return mode, systemctl, bus
    if not os.path.exists(os.path.join(root, 'cpuset', 'cpuset.cpus')):
        raise ConfigError('cgroup_mode v1: no cgroup v1 cpuset hierarchy '
                          'at %s' % os.path.join(root, 'cpuset'))
    if opts.memory_limit_mib and not os.path.exists(
            os.path.join(root, 'memory', 'memory.limit_in_bytes')):
        raise ConfigError('memory_limit_mib is set but there is no cgroup '
                          'v1 memory hierarchy at %s'
                          % os.path.join(root, 'memory'))
    return mode, None, None


def load(opts: Options, paths: HostPaths = HOST,
         nova_sets: typing.Optional[NovaSets] = None) -> Settings:
    """Validated ``Settings``; ``ConfigError`` if anything is wrong.
    ``nova_sets``: nova's (cpu_shared_set, cpu_dedicated_set) when the
    caller read the overcommit file already (a metrics scrape), else the
    file is read here."""
    cpus = _reserved_cpus(opts, paths)
    check_guest_overlap(opts.overcommit_file, cpus, nova_sets)
    mems = _memory_nodes(opts, paths)
    check_names(opts)
    mode, systemctl, bus = resolve_mode(opts, paths)
    limit = _memory_limit(opts, paths)
    if limit and mode == state.CgroupMode.SYSTEMD:
        LOG.warning('isolation: memory_limit_mib applies to cgroup v1 '
                    'only; ignored with systemd (set MemoryMax= on the '
                    'slices instead)')
        limit = None
    group = '/' + opts.group_name
    rules = classify.Rules(
        group=group,
        excluded_names=classify.comm_names(opts.exclude_process_names),
        move_from=frozenset(p.rstrip('/') or '/'
                            for p in opts.move_from_groups),
        only_descendants_of=opts.only_descendants_of)
    return Settings(
        mode=mode, cpus=cpus, mems=mems, cgroup_root=opts.cgroup_root,
        group_name=opts.group_name, memory_limit_mib=limit, rules=rules,
        pidfile_dirs=tuple(opts.pidfile_dirs),
        sweep_interval=opts.sweep_interval, slices=tuple(opts.slices),
        state_file=opts.state_file, systemctl=systemctl, paths=paths,
        interrupts=opts.interrupts, workqueues=opts.workqueues,
        system_bus=bus)
