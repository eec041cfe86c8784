"""Every configuration option of the package, and ``list_opts``.

The options live in two groups so that, loaded into nova-compute's own
configuration object, they cannot collide with nova's:

* ``[nova_pinning]``: binding guests (policy, libvirt, reconciler, hooks);
* ``[nova_pinning_isolation]``: keeping host processes off guest CPUs.

Nothing here reads a file or touches the host; ``register_opts`` is
idempotent so both the CLI and the nova plugin can call it.

Values are typed strictly: integers and floats in ASCII digits only
(``int`` and ``float`` alone also take ``'٣'``), floats finite (not
``inf`` or ``nan``), every number bounded so that sleeps, waits and
products stay representable. oslo.config checks a value only when it
is first read: the commands read them all before doing anything
(``cmd.confcheck.validate_options``).
"""

import math
import re
import typing

from oslo_config import cfg
from oslo_config import types

from nova_pinning_hooks.engine import emuthreads
from nova_pinning_hooks.engine import hostchoice
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine.policy import options as policy_options
from nova_pinning_hooks.isolation import state as isolation_state

PINNING_GROUP = 'nova_pinning'
ISOLATION_GROUP = 'nova_pinning_isolation'

DEFAULT_STATE_DIR = '/var/lib/nova-pinning-hooks'

# Seconds: a day bounds every wait, delay and interval, far below what
# time.sleep and Event.wait can represent.
MAX_SECONDS = 86400
MAX_PID = 4194304  # the kernel's PID_MAX_LIMIT
# ``weigher_multiplier``'s default: benchmarks/fleet.py, in
# doc/source/reference/performance.rst ("Across the cloud").
DEFAULT_WEIGHER_MULTIPLIER = 30.0
DEFAULT_SUMMARY_MAX_AGE = 300

_INTEGER = re.compile(r'[+-]?[0-9]{1,20}', re.ASCII)
_FLOAT = re.compile(r'[+-]?([0-9]{1,20}(\.[0-9]{0,20})?|\.[0-9]{1,20})'
                    r'([eE][+-]?[0-9]{1,3})?', re.ASCII)


class StrictInteger(types.Integer):
    """An integer in ASCII digits."""

    def __call__(self, value: typing.Any) -> typing.Optional[int]:
        if isinstance(value, str) and value.strip() and \
                _INTEGER.fullmatch(value.strip()) is None:
            raise ValueError('%.40r is not an integer' % value)
        result: typing.Optional[int] = super().__call__(value)
        return result


class FiniteFloat(types.Float):
    """A finite number in ASCII digits: not ``inf``, ``nan`` or ``'٣'``."""

    def __call__(self, value: typing.Any) -> typing.Optional[float]:
        if isinstance(value, str) and value.strip() and (
                _FLOAT.fullmatch(value.strip()) is None or
                not math.isfinite(float(value))):
            raise ValueError('%.40r is not a finite number' % value)
        result: typing.Optional[float] = super().__call__(value)
        if result is not None and not math.isfinite(result):
            raise ValueError('%r is not a finite number' % result)
        return result


class ListenAddress(types.String):
    """``ADDR:PORT`` or ``[IPv6]:PORT`` with a literal IP address, or
    empty."""

    def __call__(self, value: typing.Any) -> str:
        text: str = super().__call__(value)
        if text:
            # Imported here: nova and oslo-config-generator load this
            # module for the options alone, not for an HTTP server.
            from nova_pinning_hooks.observe import httpserve
            httpserve.parse_listen(text)  # ValueError says why
        return text


class IntOpt(cfg.IntOpt):
    """``cfg.IntOpt`` typed ``StrictInteger``."""

    def __init__(self, name: str,
                 min: typing.Optional[int] = None,  # noqa: A002
                 max: typing.Optional[int] = None,  # noqa: A002
                 **kwargs: typing.Any) -> None:
        cfg.Opt.__init__(self, name, type=StrictInteger(min=min, max=max),
                         **kwargs)


class FloatOpt(cfg.FloatOpt):
    """``cfg.FloatOpt`` typed ``FiniteFloat``."""

    def __init__(self, name: str,
                 min: typing.Optional[float] = None,  # noqa: A002
                 max: typing.Optional[float] = None,  # noqa: A002
                 **kwargs: typing.Any) -> None:
        cfg.Opt.__init__(self, name, type=FiniteFloat(min=min, max=max),
                         **kwargs)


pinning_group = cfg.OptGroup(
    PINNING_GROUP, title='vCPU binding',
    help='How nova-pinning-hooks binds the vCPUs of the live guests of '
         'this compute node to host CPUs.')

isolation_group = cfg.OptGroup(
    ISOLATION_GROUP, title='Host process isolation',
    help='How nova-pinning-isolate keeps host processes on the reserved '
         'host CPUs, off the guests\' CPUs.')

pinning_opts = [
    cfg.BoolOpt('enabled', default=True,
                help='Master switch. When false, no hook and no pass runs '
                     'and no guest is touched; inside nova-compute only '
                     'the filter that keeps the package\'s pins out of '
                     'live migration and unrescue XML is installed (guests '
                     'pinned before keep those live pins until they '
                     'restart). The release command runs all the same.'),
    cfg.StrOpt('connection_uri', default='qemu:///system',
               help='libvirt connection URI of the local hypervisor. '
                    'Inside nova-compute, unless set here, the package '
                    'binds the guests of nova\'s own connection: '
                    '[libvirt] connection_uri, or, when that is empty, '
                    'the URI nova derives from [libvirt] virt_type '
                    '(qemu:///system for kvm and qemu); its pass worker '
                    'process is given the same. The nova-pinning '
                    'commands and the agent run outside nova use this '
                    'option (or --connection).'),
    cfg.StrOpt('reserved_cpus',
               help='Host CPUs kept for the host (libvirt CPU set syntax, '
                    'for example "0-1"). They never carry guest vCPUs, '
                    'and nova-pinning-isolate confines host processes to '
                    'them. Unset: no CPU is reserved.'),
    cfg.StrOpt('overcommit_file',
               default=DEFAULT_STATE_DIR + '/nova/overcommit.json',
               help='File in which the nova plugin records, at '
                    'nova-compute start, the effective CPU allocation '
                    'ratio and nova\'s CPU sets. Every pass reads it; a '
                    'missing or corrupt file means no pass. Its directory '
                    'belongs to the nova user (nova-compute writes it); '
                    'root only reads it, as a regular file of at most '
                    '1 MiB, never through a link.'),
    FloatOpt('allocation_ratio', min=0.0, max=policy.MAX_RATIO,
             help='Use this CPU allocation ratio instead of the one in '
                  'overcommit_file (for hosts without the nova plugin, '
                  'and for tests). Must be > 0.'),
    cfg.StrOpt('lock_path', default=DEFAULT_STATE_DIR,
               help='Directory whose flock serialises rebinding passes on '
                    'this host (nova-compute\'s and root\'s alike). '
                    'Nothing is created in it; both users need only to '
                    'open it for reading. Made (root:root 0755) when '
                    'missing and this process may.'),
    FloatOpt('lock_timeout', default=150.0, min=0.0, max=MAX_SECONDS,
             help='Seconds a pass waits for another pass to finish '
                  'before giving up with an error. Longer than '
                  'pass_timeout, so a waiter outlasts a holder that '
                  'runs to its deadline.'),
    FloatOpt('pass_timeout', default=120.0, min=1.0, max=MAX_SECONDS,
             help='Seconds a pass may take, from taking the lock to '
                  'its last libvirt call; a pass that would overrun '
                  'ends with an error, its remaining writes skipped, '
                  'and releases the lock.'),
    FloatOpt('libvirt_call_timeout', default=30.0, min=0.1,
             max=MAX_SECONDS,
             help='Seconds one libvirt call may take (a hung libvirtd '
                  'answers none); the pass then ends with an error '
                  'and the connection is abandoned and reopened by '
                  'the next pass.'),
    cfg.BoolOpt('kernel_affinity', default=True,
                help='Also read each vCPU thread\'s CPU affinity from the '
                     'kernel (/proc) and repair pins that were changed '
                     'behind libvirt\'s back (a vCPU\'s cgroup cpuset '
                     'edited by hand). One small /proc read per guest '
                     'thread.'),
    cfg.StrOpt('foreign_domains', default='manage',
               choices=policy_options.ForeignDomains.choices({
                   'manage': 'bind them like nova guests',
                   'ignore': 'leave their pins alone; they keep running '
                             'wherever they run now'}),
               help='What to do with live domains that nova did not '
                    'create (no nova metadata in their XML).'),
    cfg.BoolOpt('set_home_node', default=False,
                help='Give a guest whose memory is not placed yet (numad '
                     'not running) a home node by setting its memory '
                     'policy through libvirt (strict nodeset). Off: only '
                     'vCPUs are pinned; the kernel then tends to allocate '
                     'new memory near them.'),
    cfg.BoolOpt('memory_home', default=True,
                help='Bring an arrived guest\'s memory to its home node. '
                     'A guest migrated in or restored (managed save, '
                     'suspend) has its memory where qemu\'s incoming '
                     'copy put it, often on both nodes; the policy homes '
                     'it and binds it there while it fits one node, and '
                     'with this option a thread of its own moves its '
                     'pages there after the copy: one guest at a time, '
                     'only while the home node\'s free memory holds '
                     'them and 256 MiB more, within 30 s plus 20 s a '
                     'GiB, at most 8 GiB, through a live memory nodeset '
                     'in restrictive mode that is widened to every node '
                     'again afterwards; tried again 300 s later when it '
                     'could not. Off: its vCPUs are bound on its home '
                     'node all the same and its memory stays where it '
                     'is (the kernel\'s automatic NUMA balancing may '
                     'gather the pages the guest touches).'),
    cfg.StrOpt('emulator_threads', default='shared',
               choices=emuthreads.Setting.choices({
                   'guest': 'with the guest\'s own vCPUs',
                   'shared': 'one-to-one guests: on the pCPUs of the home '
                             'node\'s pool that no one-to-one vCPU holds'}),
               help='Where a one-to-one guest\'s emulator thread and '
                    'IOThreads run. guest: on its own vCPUs\' pCPUs, so '
                    'its disk and network work takes time from its '
                    'vCPUs. shared: over the pCPUs of its home node\'s '
                    'pool that no one-to-one vCPU holds, or, when there '
                    'are none, over the node\'s whole pool. Node-range, '
                    'cross-node and host-range guests keep theirs with '
                    'their vCPUs either way. The default follows the '
                    'measurements in doc/source/reference/performance.rst; '
                    'guest plans as releases before this option did.'),
    FloatOpt('home_node_min_fraction', default=0.9, min=0.5, max=1.0,
             help='A guest whose memory lies on one NUMA node for at '
                  'least this fraction has that node as its home '
                  'node; otherwise it is a cross-node guest.'),
    IntOpt('busy_retries', default=3, min=0, max=100,
           help='How many times a pin call is retried when libvirt '
                'says the domain is busy in another job.'),
    FloatOpt('busy_retry_delay', default=0.5, min=0.0, max=60.0,
             help='Seconds between those retries.'),
    FloatOpt('coalesce_delay', default=0.2, min=0.0, max=60.0,
             help='Seconds a pass waits after the first request so '
                  'that a burst of requests (parallel boots) is '
                  'served by one pass.'),
    IntOpt('periodic_interval', default=60, min=0, max=MAX_SECONDS,
           help='Seconds between safety-net passes inside '
                'nova-compute, catching changes no hook saw. 0 turns '
                'them off.'),
    FloatOpt('steal_warning_percent', default=10.0, min=0.0, max=100.0,
             help='A guest whose vCPUs wait this share of the time or '
                  'more for a host CPU (host-side steal, %) is marked '
                  'in "nova-pinning status" and "nova-pinning top".'),
    cfg.StrOpt('metrics_textfile', default='',
               help='After each pass in nova-compute (or in "nova-pinning '
                    'agent"), write the '
                    'Prometheus metrics (as "nova-pinning metrics" '
                    'prints them) to this file, for node_exporter\'s '
                    'textfile collector: a file ending in .prom in its '
                    '--collector.textfile.directory, which the nova user '
                    'may write. Replaced atomically, mode 0644. Empty: '
                    'not written.'),
    cfg.Opt('metrics_listen', type=ListenAddress(), default='',
               help='ADDR:PORT (for example 127.0.0.1:9179 or '
                    '[::1]:9179) on which the process that runs the '
                    'passes in nova-compute (its pass thread, or its '
                    'pass worker under eventlet) serves its Prometheus '
                    'metrics on /metrics: the host\'s series with its '
                    'pass counters, what "nova-pinning agent --listen" '
                    'serves (and "nova-pinning agent" without '
                    '--listen). Scrape this or the metrics_textfile, not '
                    'both. Empty: no port opened.'),
    IntOpt('metrics_max_requests', default=40, min=1, max=1000,
           help='Metrics requests served at once over HTTP (this '
                'option, the agent\'s --listen, the exporter); one more '
                'is answered 503 at once (node_exporter\'s '
                '--web.max-requests).'),
    IntOpt('metrics_max_requests_per_peer', default=4, min=1, max=1000,
           help='Of metrics_max_requests, how many one client may hold at '
                'once (an IPv4 address, an IPv6 /64; every loopback '
                'address counts as one client); one more from it is '
                'answered 503 at once, so clients that hold connections '
                'open cannot make every scrape from elsewhere a 503. '
                'Refusals are logged, one warning a minute at most.'),
    FloatOpt('metrics_read_timeout', default=10.0, min=0.1, max=300.0,
             help='Seconds a metrics client has to send its whole HTTP '
                  'request (and to take the answer) before the '
                  'connection is closed.'),
    IntOpt('resync_interval', default=60, min=0, max=MAX_SECONDS,
           help='Long-lived passes (the agent, nova-compute) read only '
                'the domains that are new, re-created or named by a '
                'libvirt event; every this many seconds one pass reads '
                'every domain again, catching what no event tells (a '
                'vCPU thread moved behind libvirt\'s back). 0: never.'),
    FloatOpt('vcpu_poll_interval', default=1.0, min=0.0, max=MAX_SECONDS,
             help='Long-lived passes: every this many seconds, libvirt '
                  'is asked how many vCPUs each running guest has (a '
                  'listing and one call a guest, answered from its live '
                  'definition without qemu\'s monitor), and a guest '
                  'whose count changed is read and bound again. libvirt '
                  '(9.0) raises no event for a vCPU hot-plugged with '
                  '"virsh setvcpus --live": without this, the new vCPU '
                  'runs anywhere until the next resync. 0: never.'),
    cfg.BoolOpt('report_summary', default=True,
                help='Inside nova-compute: report the last pass\'s plan, '
                     'summed up NUMA node by NUMA node, in the compute '
                     'node\'s stats (key nova_pinning_numa), which nova\'s '
                     'scheduler reads; the weigher '
                     'nova_pinning_hooks.nova.weigher.OneToOneWeigher '
                     'places guests by it. A few hundred bytes; no libvirt '
                     'call. See doc/source/reference/nova-integration.rst, '
                     '"Across the cloud".'),
    cfg.StrOpt('summary_file',
               default=DEFAULT_STATE_DIR + '/nova/summary.json',
               help='Under eventlet, where nova-compute\'s pass worker '
                    'leaves what its last pass planned, for nova-compute '
                    'to report (report_summary). Written by the nova '
                    'user, atomically, after each pass that planned '
                    'something new, and again by a pass once a quarter of '
                    'summary_max_age has gone by.'),
    IntOpt('summary_max_age', default=DEFAULT_SUMMARY_MAX_AGE, min=1,
           max=MAX_SECONDS,
           help='Seconds after which the last pass\'s plan is too old to '
                'report (passes failing, or the pass worker gone): the '
                'compute node\'s stats then carry no summary and the '
                'weigher gives the host a neutral weight. In '
                'nova-scheduler: a summary older than this by more than '
                'two minutes (a compute that stopped saving its node: '
                'nova-compute down) weighs neutral too.'),
    FloatOpt('weigher_multiplier', default=DEFAULT_WEIGHER_MULTIPLIER,
             min=-1000.0, max=1000.0,
             help='In nova-scheduler: the multiplier of '
                  'nova_pinning_hooks.nova.weigher.OneToOneWeigher (an '
                  'aggregate\'s metadata key '
                  'nova_pinning_weigher_multiplier overrides it for its '
                  'hosts, as nova\'s own weighers\' keys do). Its weight, '
                  'normalised as every weigher\'s, lies in [0, 1]: 0.8 to '
                  '1 where the guest would be one-to-one (the fuller its '
                  'node, the likelier the host once the fleet fills), 0.5 '
                  'to 0.7 where nobody gains or loses one-to-one binding '
                  '(the fuller the host, the higher; 0.5 on hosts that '
                  'report no summary), 0 to 0.4 where guests would lose '
                  'it. Bands 0.1 apart: above 10 times the span of the '
                  'other weighers, the band decides (nova\'s default set '
                  'weighs RAM, CPU, disk and I/O operations on every '
                  'host: from 40 on always, at 30 unless one host is the '
                  'best of all four). The default follows '
                  'benchmarks/fleet.py '
                  '(doc/source/reference/performance.rst). 0: no effect.'),
    FloatOpt('weigher_spread_below', default=hostchoice.SPREAD_BELOW,
             min=0.0, max=1.0,
             help='In nova-scheduler: below this fill of the candidate '
                  'hosts\' pools (their guests\' vCPUs over their pool '
                  'pCPUs) nova_pinning_hooks.nova.weigher.OneToOneWeigher '
                  'weighs every host alike and leaves nova\'s spread as '
                  'it was, even where a guest could be one-to-one on '
                  'another host (a fleet of mixed sizes: nova fills the '
                  'large hosts first, and the small ones stay empty). '
                  'Over the tenth below it the one-to-one bands come in, '
                  'from it they weigh wholly. 0 (the default): the bands '
                  'at every fill, and within the one-to-one band nova\'s '
                  'spread chooses while the fleet has room. See '
                  'doc/source/admin/nova.rst.'),
    cfg.StrOpt('hook_name', default='bind_numa_affinity',
               help='Name of the nova hook run around the wrapped compute '
                    'manager methods (entry point namespace nova.hooks).'),
    cfg.ListOpt('hooked_methods',
                default=[
                    # build_and_run_instance returns before the guest
                    # exists (it spawns the build); this runs the build.
                    '_do_build_and_run_instance', 'init_host',
                    'terminate_instance',
                    'stop_instance', 'start_instance', 'reboot_instance',
                    'rebuild_instance', 'soft_delete_instance',
                    'restore_instance', 'rescue_instance',
                    'unrescue_instance', 'resize_instance', 'finish_resize',
                    'revert_resize', 'finish_revert_resize',
                    '_post_live_migration',
                    'post_live_migration_at_destination',
                    'rollback_live_migration_at_destination',
                    'shelve_instance', 'shelve_offload_instance',
                    'unshelve_instance', 'suspend_instance',
                    'resume_instance', 'pause_instance', 'unpause_instance',
                    'finish_snapshot_based_resize_at_dest',
                    'revert_snapshot_based_resize_at_dest',
                    'finish_revert_snapshot_based_resize_at_source',
                    # The seed's cloud had it; upstream nova does not.
                    'live_resize',
                ],
                help='nova.compute.manager.ComputeManager methods after '
                     'which the guests are re-bound. Methods a nova '
                     'release lacks are skipped with a log line.'),
]

isolation_opts = [
    cfg.StrOpt('cgroup_mode', default='auto',
               choices=isolation_state.CgroupMode.choices({
                   'auto': 'systemd with cgroup v2 if pid 1 is systemd on a '
                           'unified hierarchy, else v1',
                   'systemd': 'AllowedCPUs= on slices',
                   'v1': 'a cgroup v1 cpuset group (deprecated in 1.1.0, '
                         'removed in 2.0.0)'}),
               help='How host processes are confined.'),
    cfg.StrOpt('cgroup_root', default='/sys/fs/cgroup',
               help='Where the cgroup hierarchies are mounted.'),
    cfg.StrOpt('group_name', default='nova-pinning-host',
               help='Name of the cgroup v1 group that holds host '
                    'processes.'),
    IntOpt('memory_limit_mib', min=0, max=1 << 40,
           help='cgroup v1 only: memory limit of the host group in '
                'MiB (at least 256, below the host\'s memory). It '
                'applies to memory allocated after a process is '
                'moved. Unset: no limit.'),
    cfg.StrOpt('memory_nodes',
               help='NUMA nodes host processes allocate memory from '
                    '(node set syntax, for example "0"): cpuset.mems of '
                    'the cgroup v1 group, AllowedMemoryNodes= with '
                    'systemd. Unset: every node, memory placement '
                    'unchanged.'),
    cfg.ListOpt('exclude_process_names',
                default=['ovs-vswitchd', 'ovsdb-server', 'qemu-kvm',
                         'qemu-system-x86_64', 'qemu-system-aarch64'],
                help='Processes never moved, by command name (matched on '
                     'the kernel\'s comm, its first 15 characters): Open '
                     'vSwitch has its own isolation and guests run on the '
                     'guest pool.'),
    cfg.ListOpt('pidfile_dirs', default=['/run', '/var/run'],
                help='Directories watched with inotify for daemons\' pid '
                     'files (names ending in .pid, there and one directory '
                     'down, such as /run/libvirt/libvirtd.pid), to follow '
                     'daemon restarts.'),
    IntOpt('sweep_interval', default=30, min=1, max=MAX_SECONDS,
           help='Seconds between sweeps of /proc that catch processes '
                'keeping no pid file (with systemd: between checks '
                'that the slices are still confined).'),
    FloatOpt('status_timeout', default=5.0, min=0.1, max=MAX_SECONDS,
             help='Seconds "nova-pinning-isolate status", and the agent '
                  'at each sweep for the status it publishes, may spend '
                  'asking systemd about one unit: once systemd did not '
                  'answer for one in time, the units not asked yet are '
                  'reported unknown at once. A hung systemd costs one '
                  'such bound; a slow one that answers, at most this '
                  'much a unit (4 units by default). The metrics and '
                  'nova-compute never ask systemd: they read the status '
                  'the agent publishes beside its state file.'),
    cfg.ListOpt('slices', default=['system.slice', 'user.slice',
                                   'init.scope'],
                help='systemd units confined with AllowedCPUs=; '
                     'machine.slice (the guests) is never in this list.'),
    cfg.ListOpt('move_from_groups', default=['/'],
                help='cgroup v1 only: processes are moved only out of '
                     'these cpuset groups (and, with memory_limit_mib, '
                     'only out of these memory groups into the memory '
                     'group). The default, the root group, leaves '
                     'processes that another tool placed in a group of '
                     'its own (containers, other agents, service '
                     'managers) where they are.'),
    IntOpt('only_descendants_of', min=2, max=MAX_PID,
           help='Confine only the descendants of this pid, not every '
                'host process: for trials and tests.'),
    cfg.BoolOpt('interrupts', default=True,
                help='Keep device interrupts off one-to-one CPUs: every '
                     'interrupt whose affinity the kernel lets us change '
                     'goes to its CPUs minus the one-to-one ones (else to '
                     'every CPU no one-to-one vCPU holds), follows the pins '
                     'as passes change them, and is restored by "undo". '
                     'A running irqbalance (1.9 or later) is told to keep '
                     'off them too, through its socket.'),
    cfg.BoolOpt('workqueues', default=True,
                help='Keep unbound kernel workqueues off one-to-one CPUs '
                     '(/sys/devices/virtual/workqueue/cpumask), restored '
                     'by "undo".'),
    FloatOpt('interrupt_sample_seconds', default=1.0, min=0.0, max=60.0,
             help='Seconds between the two readings of /proc/interrupts '
                  'from which "status" counts the interrupts still '
                  'delivered on one-to-one CPUs (0: not counted). A '
                  'long-lived reader (the metrics exporter) counts since '
                  'its previous reading instead of waiting.'),
    cfg.StrOpt('state_file', default=DEFAULT_STATE_DIR + '/isolation.json',
               help='Where the agent records what it changed, so that '
                    '"undo" can restore it.'),
]


# The URI nova's libvirt driver opens when [libvirt] connection_uri is
# empty, by [libvirt] virt_type (LibvirtDriver._uri); kvm and qemu: the
# default. Inside nova-compute the package binds the guests of that
# connection (``nova.activation``), and ``nova-pinning-status`` reads them.
NOVA_URIS = {'lxc': 'lxc:///', 'parallels': 'parallels:///system'}
NOVA_URI = 'qemu:///system'


def nova_uri(connection_uri: typing.Optional[str],
             virt_type: typing.Optional[str]) -> str:
    """The libvirt URI nova opens for these values of its ``[libvirt]``
    options."""
    return connection_uri or NOVA_URIS.get(virt_type or '', NOVA_URI)


def _fresh(group: cfg.OptGroup) -> cfg.OptGroup:
    # ConfigOpts.register_group keeps a shallow copy of the group, whose
    # option table (and so every override) would be shared by every
    # ConfigOpts registered from the same OptGroup object.
    return cfg.OptGroup(group.name, title=group.title, help=group.help)


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register every option on ``conf``; safe to call more than once.

    Each ConfigOpts gets groups of its own, so values set on one (tests,
    the CLI, nova's CONF) never show in another."""
    for group, opts in list_opts():
        if group.name not in conf:
            conf.register_group(_fresh(group))
        conf.register_opts(opts, group=group.name)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    """The oslo-config-generator entry point."""
    return [(pinning_group, pinning_opts),
            (isolation_group, isolation_opts)]
