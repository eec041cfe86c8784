"""The isolation agent's status, published for readers that must not ask
systemd.

The agent (``watch``, and ``apply`` once) writes what ``status`` shows
(the recorded state, the units or the group as the backend reports them,
the kernel's work) to ``path_for(state_file)`` (``isolation.status.json``
beside ``isolation.json``) after every sweep. The metrics
(nova-compute's textfile after each pass, the HTTP endpoint's scrapes,
``nova-pinning metrics`` and ``exporter``) and ``nova-pinning status``
read that file (``read``) instead of asking systemd themselves: before,
each read cost 16 D-Bus calls of up to 30 s each, on nova-compute's pass
thread among others (issue 40, M-1). Only ``nova-pinning-isolate
status`` still asks systemd, each unit within ``status_timeout``.

Content (JSON, version 1)::

    {"version": 1,
     "written": 1764150000.5,    # Unix time
     "boottime": 5123.4,         # CLOCK_BOOTTIME then: the age's clock
     "boot_id": "...",           # the kernel's boot id then
     "sweep_interval": 30,       # the agent's, in seconds
     "pid": 812,
     "status": {"state": "applied", ...}}  # Status

Invariants:

* written atomically (``statefile.write_json``: temporary file, fsync,
  rename, directory fsync; no link followed), mode 0644 set on the
  descriptor whatever the umask (nova-compute reads it as the nova
  user), by the agent alone, in its state directory (root's and
  writable by nobody else: ``safefs`` refuses any other to root);
* read as a regular file of at most ``LIMIT`` bytes that root (or the
  reader) owns and nobody else may write, each field checked for its
  type; ``read`` never raises and opens nothing but that file and the
  kernel's boot id;
* the age is measured on ``CLOCK_BOOTTIME`` (a wall-clock step changes
  nothing); a status older than ``STALE_SWEEPS`` of the agent's own
  sweeps is ``status_stale``; one written before the last reboot says
  nothing of now: its state is 'not applied' (``earlier_boot``), as the
  state file's;
* ``undo`` removes it with the state file;
* ``Published`` is the file's record: ``to_json`` writes version
  ``VERSION``, ``from_json`` reads every version of ``VERSIONS`` (a test
  holds a document of each) and refuses any other.
"""

import dataclasses
import functools
import math
import os
import time
import typing

from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.isolation import state

VERSION = 1
VERSIONS = (1,)  # what ``from_json`` reads: this release's and earlier
LIMIT = 256 * 1024
STALE_SWEEPS = 3  # a status older than this many sweeps is stale
MODE = 0o644
_DEPTH = 3  # status -> slices -> unit -> property


class IrqbalanceSeen(typing.TypedDict):
    """The running irqbalance, and the CPUs it was told (None: none)."""

    pid: int
    told: typing.Optional[str]


class Status(typing.TypedDict, total=False):
    """What ``status`` shows (``report``) and the agent publishes; keys
    are absent when unknown."""

    # 'applied' (a state file records changes), 'not applied' (with
    # earlier_boot when a state file is left from before the last reboot,
    # which undid it), 'not configured' (the configuration is refused:
    # why), 'unknown' (error)
    state: str
    earlier_boot: bool
    why: str
    error: str
    paused: str  # why watch confines nothing more now
    # From the configuration
    mode: str
    reserved_cpus: str
    # From the state file
    applied_mode: str
    applied_cpus: typing.Optional[str]
    recorded_processes: int
    # cgroup v1: the host group; confined: processes in it; not_confined:
    # processes that would be moved but are not (started since the last
    # sweep); kept: {reason: count} of processes never moved
    group: str
    group_exists: bool
    group_cpus: typing.Optional[str]
    group_processes: int
    confined: int
    not_confined: int
    kept: dict[str, int]
    # systemd: {unit: {AllowedCPUs, EffectiveCPUs, ...}} with
    # machine.slice ({error} for a unit systemd did not answer for);
    # confined / not_confined: units whose EffectiveCPUs are / are not the
    # reserved CPUs; units_unknown: units not read
    slices: dict[str, dict[str, str]]
    units_unknown: int
    systemd_through: str
    backend_error: str  # the backend could not be asked at all
    # Kernel work (kernelwork.status): the one-to-one CPUs in force (from
    # the vCPU threads); interrupts whose affinity still holds one of
    # them; moved / refused (from the state file); {irq: interrupts
    # delivered on one-to-one CPUs} between two readings of
    # /proc/interrupts irq_sample_seconds apart; the unbound workqueues'
    # CPUs; the running irqbalance
    one_to_one_cpus: str
    interrupts_enabled: bool
    workqueues_enabled: bool
    irqs_on_one_to_one: int
    irqs_moved: int
    irqs_refused: int
    irqs_firing_on_one_to_one: dict[str, int]
    irq_sample_seconds: float
    workqueue_cpus: str
    irqbalance: IrqbalanceSeen
    pins_error: str
    # What ``read`` adds: when the agent published it (Unix time, 0:
    # nothing published), its age in seconds, whether it is older than
    # STALE_SWEEPS of the agent's sweeps, and the agent's sweep interval
    status_written: float
    status_age: float
    status_stale: bool
    status_sweep_interval: int
    agent: 'Status'  # nova-pinning-isolate status: the published one


def path_for(state_file: str) -> str:
    """Where the status is published: beside the state file, named
    after it (``isolation.json`` -> ``isolation.status.json``)."""
    root, ext = os.path.splitext(state_file)
    return root + '.status' + (ext or '.json')


def _boottime() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


@dataclasses.dataclass(frozen=True)
class Published:
    """One status as the agent published it."""

    written: float  # Unix time
    sweep_interval: int  # the agent's, in seconds
    status: Status
    boottime: typing.Optional[float] = None  # CLOCK_BOOTTIME then
    boot_id: typing.Optional[str] = None  # the kernel's boot id then
    pid: typing.Optional[int] = None


def to_json(p: Published) -> dict[str, object]:
    """The document of version ``VERSION``."""
    return {'version': VERSION, 'written': p.written,
            'boottime': p.boottime, 'boot_id': p.boot_id,
            'sweep_interval': p.sweep_interval, 'pid': p.pid,
            'status': dict(p.status)}


def write(state_file: str, status: Status,
          sweep_interval: int, proc: str = '/proc') -> None:
    """Publish ``status`` (under the agent's lock). Raises ``OSError``
    when it cannot be written safely."""
    path = path_for(state_file)
    safefs.remove_stale_temporaries(path)
    statefile.write_json(path, to_json(Published(
        written=round(time.time(), 3), sweep_interval=sweep_interval,
        status=status, boottime=round(_boottime(), 3),
        boot_id=state.boot_id(proc), pid=os.getpid())), mode=MODE)


def remove(state_file: str) -> None:
    try:
        os.unlink(path_for(state_file))
    except FileNotFoundError:
        pass


@functools.lru_cache(maxsize=1)
def _status_hints() -> dict[str, object]:
    return typing.get_type_hints(Status)


def _fits(value: object, hint: object, depth: int) -> bool:
    """Whether ``value`` (parsed JSON) is of the type ``hint`` declares
    (a key ``Status`` does not know, hint None: plain JSON, ``depth``
    levels), so that every reader can take the record's types as given
    (issue 60: a float count raised out of the metrics)."""
    if hint is None:
        return _plain(value, depth)
    if hint is bool:
        return isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return _number(value)
    if hint is type(None):
        return value is None
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union:
        return any(_fits(value, arg, depth) for arg in args)
    if depth <= 0 or not isinstance(value, dict):
        return False
    if typing.get_origin(hint) is dict:
        return all(isinstance(k, str) and _fits(v, args[1], depth - 1)
                   for k, v in value.items())
    required = getattr(hint, '__required_keys__', None)  # a TypedDict
    if isinstance(required, frozenset):
        hints = typing.get_type_hints(hint)
        return required <= value.keys() and all(
            _fits(v, hints.get(k), depth - 1) for k, v in value.items())
    return False


def _plain(value: object, depth: int) -> bool:
    """A JSON value of scalars and objects only, ``depth`` levels."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    return depth > 0 and isinstance(value, dict) and all(
        isinstance(k, str) and _plain(v, depth - 1)
        for k, v in value.items())


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and \
        not isinstance(value, bool) and math.isfinite(value) and value >= 0


def from_json(doc: object, path: str) -> Published:
    """The record of a document of any version of ``VERSIONS``;
    ``ValueError`` naming ``path`` for anything else."""
    def require(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError('%s: %s' % (path, what))
    # Raised here, not by ``require``: what follows reads it as a mapping.
    if not (isinstance(doc, dict) and doc.get('version') in VERSIONS and
            not isinstance(doc.get('version'), bool)):
        raise ValueError('%s: not a version %s isolation status'
                         % (path, ' or '.join(map(str, VERSIONS))))
    written, boottime = doc.get('written'), doc.get('boottime')
    boot_id, pid = doc.get('boot_id'), doc.get('pid')
    interval, status = doc.get('sweep_interval'), doc.get('status')
    require(_number(written), 'bad "written"')
    require(boottime is None or _number(boottime), 'bad "boottime"')
    require(boot_id is None or isinstance(boot_id, str), 'bad "boot_id"')
    require(isinstance(interval, int) and not isinstance(interval, bool)
            and interval >= 1, 'bad "sweep_interval"')
    require(pid is None or (isinstance(pid, int) and
                            not isinstance(pid, bool)), 'bad "pid"')
    require(isinstance(status, dict) and
            isinstance(status.get('state'), str), 'bad "status"')
    assert isinstance(status, dict)  # for mypy: required just above
    for key, value in status.items():
        require(_fits(value, _status_hints().get(key), _DEPTH - 1),
                'bad "status": %r is not a %s' % (key, _status_hints().get(
                    key, 'value of plain JSON')))
    # Each field's type checked above (``require``).
    return Published(
        written=typing.cast(float, written),
        sweep_interval=typing.cast(int, interval),
        status=typing.cast(Status, status),
        boottime=typing.cast(typing.Optional[float], boottime),
        boot_id=typing.cast(typing.Optional[str], boot_id),
        pid=typing.cast(typing.Optional[int], pid))


def read(state_file: str, proc: str = '/proc',
         now: typing.Optional[float] = None) -> Status:
    """What the agent published, as a Status (report.py's), with
    ``status_written`` (Unix time, 0: nothing published),
    ``status_age`` (seconds), ``status_stale`` and
    ``status_sweep_interval``. Never raises. ``now``: the
    ``CLOCK_BOOTTIME`` time to measure the age at (tests)."""
    path = path_for(state_file)
    try:
        p = from_json(statefile.read_json(
            path, LIMIT, 'isolation status', root_written=True), path)
    except FileNotFoundError:
        return {'state': 'not applied', 'status_written': 0,
                'status_stale': False,
                'why': 'no status from the isolation agent at %s (written '
                       'at every sweep of "nova-pinning-isolate watch")'
                       % path}
    except (OSError, ValueError, RecursionError) as exc:
        return {'state': 'unknown', 'status_written': 0,
                'status_stale': True, 'error': str(exc)}
    result = p.status.copy()
    result.update({'status_written': p.written,
                   'status_sweep_interval': p.sweep_interval})
    current = state.boot_id(proc)
    if p.boot_id and current and p.boot_id != current:
        # The reboot undid what it says; nobody published since.
        return {'state': 'not applied', 'earlier_boot': True,
                'status_written': p.written, 'status_stale': True,
                'status_sweep_interval': p.sweep_interval}
    if p.boottime is not None and p.boot_id and p.boot_id == current:
        age = (_boottime() if now is None else now) - p.boottime
    else:
        age = time.time() - p.written
    age = max(0.0, age)
    result['status_age'] = round(age, 1)
    result['status_stale'] = age > STALE_SWEEPS * p.sweep_interval
    return result
