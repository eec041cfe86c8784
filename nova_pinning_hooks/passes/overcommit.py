"""The overcommit file: nova's CPU allocation ratio and CPU sets, on disk.

nova never writes its overcommit ratio anywhere a pass could read it, so
the nova plugin writes it at nova-compute start (``write``) and every pass
reads it (``read``).

Invariants:

* ``write`` is atomic: a temporary file in the same directory, fsync'd,
  renamed over the old one; readers see the old file or the new one,
  never half of one. The file is 0644 and a directory made for it 0755,
  whatever the umask; nothing here is world-writable, and a directory
  another user could change is refused (``safefs``).
* ``read`` accepts only a complete, valid file: a missing, unreadable or
  corrupt file, a ratio that is not a number > 0, or a CPU set that does
  not parse raises ``OvercommitError`` with one message naming the file.
  Only a regular file of at most 1 MiB is read, never through a link and
  never blocking on a FIFO (``safefs.read_file``): root's commands read
  this file from the nova user's directory.
"""

import datetime
import socket
import typing

from nova_pinning_hooks.engine import cpuset
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.host import statefile

VERSION = 1


class OvercommitError(Exception):
    """The overcommit file is missing or unusable."""


class OvercommitInfo(typing.NamedTuple):
    allocation_ratio: float
    shared_cpus: object  # CPU set text or None
    dedicated_cpus: object  # CPU set text or None
    host: str
    written_at: str
    ratio_source: str


def effective_ratio(cpu_allocation_ratio, initial_cpu_allocation_ratio):
    """nova's rule: cpu_allocation_ratio unless unset (None or 0.0), then
    initial_cpu_allocation_ratio. Returns (ratio, name of its option)."""
    if cpu_allocation_ratio:
        return float(cpu_allocation_ratio), 'cpu_allocation_ratio'
    return (float(initial_cpu_allocation_ratio or 0.0),
            'initial_cpu_allocation_ratio')


def from_nova_conf(conf, ratio=None):
    """The file's content from nova's configuration object, and from the
    VCPU allocation ratio of the node's inventory once nova reported one
    (``ratio``): placement's, unless ``cpu_allocation_ratio`` overrides
    it (nova's ``ComputeDriver._get_allocation_ratios``)."""
    if ratio is None:
        ratio, source = effective_ratio(conf.cpu_allocation_ratio,
                                        conf.initial_cpu_allocation_ratio)
    else:
        ratio = float(ratio)
        source = ('cpu_allocation_ratio' if conf.cpu_allocation_ratio
                  else 'placement')
    shared = conf.compute.cpu_shared_set
    # Before Train, vcpu_pin_set named the CPUs guests may use.
    if not shared and getattr(conf, 'vcpu_pin_set', None):
        shared = conf.vcpu_pin_set
    return {'version': VERSION,
            'host': getattr(conf, 'host', None) or socket.gethostname(),
            'written_at': datetime.datetime.now(
                datetime.timezone.utc).isoformat(timespec='seconds'),
            'allocation_ratio': ratio,
            'ratio_source': source,
            'shared_cpus': shared or None,
            'dedicated_cpus': conf.compute.cpu_dedicated_set or None}


def write(path, content):
    """Atomically replace ``path`` with ``content`` (a dict) as JSON."""
    _check(content, path)
    statefile.write_json(path, content)


def read(path):
    """The validated content of the file; OvercommitError if unusable."""
    try:
        content = statefile.read_json(path, what='overcommit file')
    except FileNotFoundError:
        raise OvercommitError(
            'overcommit file %s does not exist: start nova-compute with '
            'the nova-pinning-hooks plugin enabled, or set [nova_pinning] '
            'allocation_ratio' % path) from None
    except OSError as exc:
        raise OvercommitError('overcommit file %s cannot be read: %s'
                              % (path, exc.strerror or exc)) from None
    except UnicodeDecodeError:
        raise OvercommitError('overcommit file %s is corrupt: not UTF-8'
                              % path) from None
    except ValueError as exc:
        raise OvercommitError('overcommit file %s is corrupt: %s'
                              % (path, exc)) from None
    _check(content, path)
    return OvercommitInfo(
        allocation_ratio=float(content['allocation_ratio']),
        shared_cpus=content.get('shared_cpus'),
        dedicated_cpus=content.get('dedicated_cpus'),
        host=str(content.get('host') or ''),
        written_at=str(content.get('written_at') or ''),
        ratio_source=str(content.get('ratio_source') or ''))


def _check(content, path):
    if not isinstance(content, dict):
        raise OvercommitError('overcommit file %s is corrupt: not a JSON '
                              'object' % path)
    version = content.get('version')
    if type(version) is not int or version != VERSION:  # not true, 1.0
        raise OvercommitError('overcommit file %s has unknown version %.32r'
                              % (path, version))
    ratio = content.get('allocation_ratio')
    if not policy.ratio_ok(ratio):
        raise OvercommitError('overcommit file %s: allocation_ratio must be '
                              'a number > 0 and at most %g, not %.32r'
                              % (path, policy.MAX_RATIO, ratio))
    for key in ('shared_cpus', 'dedicated_cpus'):
        value = content.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise OvercommitError('overcommit file %s: %s must be a CPU set '
                                  'string' % (path, key))
        try:
            cpuset.parse(value)
        except cpuset.CpusetError as exc:
            raise OvercommitError('overcommit file %s: %s: %s'
                                  % (path, key, exc)) from None
