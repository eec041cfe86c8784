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
     "status": {"state": "applied", ...}}  # report.py's keys

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
* ``undo`` removes it with the state file.
"""

import math
import os
import time
import typing

from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.host import statefile
from nova_pinning_hooks.isolation import state

VERSION = 1
LIMIT = 256 * 1024
STALE_SWEEPS = 3  # a status older than this many sweeps is stale
MODE = 0o644
_DEPTH = 3  # status -> slices -> unit -> property


def path_for(state_file: str) -> str:
    """Where the status is published: beside the state file, named
    after it (``isolation.json`` -> ``isolation.status.json``)."""
    root, ext = os.path.splitext(state_file)
    return root + '.status' + (ext or '.json')


def _boottime() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def write(state_file: str, status: typing.Mapping[str, typing.Any],
          sweep_interval: int, proc: str = '/proc') -> None:
    """Publish ``status`` (under the agent's lock). Raises ``OSError``
    when it cannot be written safely."""
    path = path_for(state_file)
    safefs.remove_stale_temporaries(path)
    statefile.write_json(path, {
        'version': VERSION, 'written': round(time.time(), 3),
        'boottime': round(_boottime(), 3), 'boot_id': state.boot_id(proc),
        'sweep_interval': sweep_interval, 'pid': os.getpid(),
        'status': dict(status)}, mode=MODE)


def remove(state_file: str) -> None:
    try:
        os.unlink(path_for(state_file))
    except FileNotFoundError:
        pass


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


def _validate(doc: object, path: str) -> dict[str, typing.Any]:
    def require(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError('%s: %s' % (path, what))
    # Raised here, not by ``require``: what follows reads it as a mapping.
    if not (isinstance(doc, dict) and doc.get('version') == VERSION and
            not isinstance(doc.get('version'), bool)):
        raise ValueError('%s: not a version %d isolation status'
                         % (path, VERSION))
    require(_number(doc.get('written')), 'bad "written"')
    require(doc.get('boottime') is None or _number(doc['boottime']),
            'bad "boottime"')
    require(doc.get('boot_id') is None or isinstance(doc['boot_id'], str),
            'bad "boot_id"')
    interval = doc.get('sweep_interval')
    require(isinstance(interval, int) and not isinstance(interval, bool)
            and interval >= 1, 'bad "sweep_interval"')
    pid = doc.get('pid')
    require(pid is None or (isinstance(pid, int) and
                            not isinstance(pid, bool)), 'bad "pid"')
    status = doc.get('status')
    require(isinstance(status, dict) and _plain(status, _DEPTH) and
            isinstance(status.get('state'), str), 'bad "status"')
    return doc


def read(state_file: str, proc: str = '/proc',
         now: typing.Optional[float] = None) -> dict[str, typing.Any]:
    """What the agent published, as report.py's dict, with
    ``status_written`` (Unix time, 0: nothing published),
    ``status_age`` (seconds), ``status_stale`` and
    ``status_sweep_interval``. Never raises. ``now``: the
    ``CLOCK_BOOTTIME`` time to measure the age at (tests)."""
    path = path_for(state_file)
    try:
        doc = _validate(statefile.read_json(
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
    result: dict[str, typing.Any] = dict(doc['status'])
    interval = doc['sweep_interval']
    result.update(status_written=doc['written'],
                  status_sweep_interval=interval)
    current = state.boot_id(proc)
    if doc.get('boot_id') and current and doc['boot_id'] != current:
        # The reboot undid what it says; nobody published since.
        return {'state': 'not applied', 'earlier_boot': True,
                'status_written': doc['written'], 'status_stale': True,
                'status_sweep_interval': interval}
    if doc.get('boottime') is not None and doc.get('boot_id') and \
            doc['boot_id'] == current:
        age = (_boottime() if now is None else now) - doc['boottime']
    else:
        age = time.time() - doc['written']
    age = max(0.0, age)
    result['status_age'] = round(age, 1)
    result['status_stale'] = age > STALE_SWEEPS * interval
    return result
