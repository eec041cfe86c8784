"""The overcommit file inside nova-compute: nova's ratio, written once.

``RatioFile`` writes ``[nova_pinning] overcommit_file`` from nova's
configuration at activation, and again whenever nova reports another
VCPU allocation ratio for its node (``update_provider_tree``: placement's,
unless ``cpu_allocation_ratio`` overrides it), with its source
(``placement``, or the option that set it): nova's ratio rule
(``effective_ratio``, ``content``). Every pass reads this file
(``host.overcommitfile``, its format); so do the agents and commands.
nova's options are read once, at activation, into a ``NovaOptions``
(``NovaOptions.read``, the edge): the writer is handed that record and
the file's path, never nova's configuration.

Invariants:

* ``note`` runs on nova's thread: it only remembers the ratio and says
  whether a pass should be requested; the file is written on the pass
  thread (``before_pass``), never on nova's;
* one node sets the ratio (a libvirt nova-compute has one; the first to
  report is it; several only in tests running many computes in one
  process);
* only this writer writes the file: what a crash left of an earlier
  write is garbage and removed first;
* when the file cannot be written, what is on disk is used only if it
  holds the same ratio and CPU sets; else it is set aside as stale and
  ``before_pass`` refuses every pass (one error line, not one a pass)
  until a write succeeds, so no pass binds with another process's CPU
  sets or ratio. A file set aside that holds them again (nova-compute
  restarted with its old configuration while the disk is still full)
  is taken back (a rename: it needs no space);
* on a filesystem read-only as a whole nothing can be rewritten nor set
  aside, and every reader, this one's passes included, refuses the
  file there (``overcommitfile.read``): no pass runs anywhere on the
  host until it is writable again.
"""

import dataclasses
import datetime
import errno
import os
import socket
import typing

from oslo_config import cfg
from oslo_log import log as logging

from nova_pinning_hooks.engine import hostsettings
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.passes import reconciler

LOG = logging.getLogger(__name__)


def effective_ratio(cpu_allocation_ratio: typing.Optional[float],
                    initial_cpu_allocation_ratio: typing.Optional[float]
                    ) -> tuple[float, str]:
    """nova's rule: cpu_allocation_ratio unless unset (None or 0.0), then
    initial_cpu_allocation_ratio. Returns (ratio, name of its option)."""
    if cpu_allocation_ratio:
        return float(cpu_allocation_ratio), 'cpu_allocation_ratio'
    return (float(initial_cpu_allocation_ratio or 0.0),
            'initial_cpu_allocation_ratio')


@dataclasses.dataclass(frozen=True)
class NovaOptions:
    """What the file takes from nova's configuration."""

    cpu_allocation_ratio: typing.Optional[float]
    initial_cpu_allocation_ratio: typing.Optional[float]
    # [compute] cpu_shared_set, else (before Train) vcpu_pin_set
    shared_cpus: typing.Optional[str]
    dedicated_cpus: typing.Optional[str]  # [compute] cpu_dedicated_set
    host: str  # nova's [DEFAULT] host, else this machine's name

    @classmethod
    def read(cls, conf: cfg.ConfigOpts) -> 'NovaOptions':
        """nova's options, from nova's configuration object (the edge)."""
        shared = conf.compute.cpu_shared_set
        # Before Train, vcpu_pin_set named the CPUs guests may use.
        if not shared and getattr(conf, 'vcpu_pin_set', None):
            shared = conf.vcpu_pin_set
        return cls(cpu_allocation_ratio=conf.cpu_allocation_ratio,
                   initial_cpu_allocation_ratio=(
                       conf.initial_cpu_allocation_ratio),
                   shared_cpus=shared or None,
                   dedicated_cpus=conf.compute.cpu_dedicated_set or None,
                   host=getattr(conf, 'host', None) or socket.gethostname())


def content(nova: NovaOptions, ratio: typing.Optional[float] = None
            ) -> hostsettings.HostSettings:
    """The file's content from nova's options, and from the VCPU
    allocation ratio of the node's inventory once nova reported one
    (``ratio``): placement's, unless ``cpu_allocation_ratio`` overrides
    it (nova's ``ComputeDriver._get_allocation_ratios``)."""
    if ratio is None:
        ratio, source = effective_ratio(nova.cpu_allocation_ratio,
                                        nova.initial_cpu_allocation_ratio)
    else:
        ratio = float(ratio)
        source = ('cpu_allocation_ratio' if nova.cpu_allocation_ratio
                  else 'placement')
    return hostsettings.HostSettings(
        allocation_ratio=ratio, ratio_source=source,
        shared_cpus=nova.shared_cpus, dedicated_cpus=nova.dedicated_cpus,
        host=nova.host, written_at=datetime.datetime.now(
            datetime.UTC).isoformat(timespec='seconds'))


def from_nova_conf(conf: cfg.ConfigOpts, ratio: typing.Optional[float] = None
                   ) -> hostsettings.HostSettings:
    """The file's content from nova's configuration object (``content``
    of ``NovaOptions.read``)."""
    return content(NovaOptions.read(conf), ratio)


class RatioFile:
    """Writes ``path``, the overcommit file, from ``nova``'s options."""

    def __init__(self, nova: NovaOptions, path: str) -> None:
        self.nova, self.path = nova, path
        # the ratio last written to the overcommit file
        self.ratio: typing.Optional[float] = None
        self._pending_ratio: typing.Optional[float] = None
        # The ratio nova last reported (None: none yet) and the one the
        # file holds as such: the first report rewrites the file, even
        # with the ratio it already has, so that it says "placement".
        self.reported_ratio: typing.Optional[float] = None
        self.written_ratio: typing.Optional[float] = None
        # The file holds this process's configuration; until it does no
        # pass runs (``error`` says why).
        self.ok = False
        self.error: typing.Optional[str] = None
        self.node: typing.Optional[str] = None

    def note(self, ratio: float, node: typing.Optional[str] = None) -> bool:
        """nova reported ``ratio`` for ``node`` (on nova's thread): True
        when a pass should be requested to write it."""
        if self.node is None:
            self.node = node
        elif node != self.node:
            LOG.debug('nova-pinning-hooks: ratio of node %s ignored (this '
                      'agent follows node %s)', node, self.node)
            return False
        if ratio == self.written_ratio or ratio == self._pending_ratio:
            return False
        self._pending_ratio = ratio
        return True

    def before_pass(self) -> typing.Optional[reconciler.PassResult]:
        """On the pass thread: write what nova reported; a failed
        ``reconciler.PassResult`` when no pass may run, else None."""
        ratio, self._pending_ratio = self._pending_ratio, None
        if ratio is not None:
            self.reported_ratio = ratio
        if not self.ok or self.reported_ratio != self.written_ratio:
            self.write(self.reported_ratio)
        if not self.ok:
            # The file on disk is not this configuration (or is gone): a
            # pass would bind with another process's CPU sets or ratio.
            return reconciler.PassResult(error=self.error,
                                         error_kind=reconciler.ErrorKind.FAILED)
        return None

    def write(self, ratio: typing.Optional[float] = None) -> bool:
        """Write the file from nova's configuration (and the ratio nova
        reported, if any); True once written or found right."""
        path = self.path
        written: typing.Optional[hostsettings.HostSettings] = None
        try:
            written = content(self.nova, ratio)
            # Only this writer writes the file: what a crash left of an
            # earlier write is garbage.
            safefs.remove_stale_temporaries(path)
            overcommitfile.write(path, written)
        except Exception as exc:
            self._not_written(path, written, exc, ratio)
            return False
        self.ratio = written.allocation_ratio
        self.written_ratio = ratio
        self.ok, self.error = True, None
        LOG.info('nova-pinning-hooks: wrote %s: allocation ratio %s (%s)',
                 path, written.allocation_ratio, written.ratio_source)
        return True

    @staticmethod
    def _take_back(path: str, content: hostsettings.HostSettings,
                   exc: Exception) -> bool:
        """The file could not be written, and a file set aside as stale
        holds ``content``'s ratio and CPU sets (nova-compute restarted
        with the configuration it had): rename it back into place (no
        space needed) and use it. Before, it stayed aside and no pass
        ran until the disk had room again (issue 40, L-2)."""
        stale = overcommitfile.stale_path(path)
        if os.path.lexists(path) or not os.path.lexists(stale) or \
                not overcommitfile.matches(stale, content):
            return False
        try:
            os.replace(stale, path)
        except OSError:
            return False
        LOG.warning('nova-pinning-hooks: cannot rewrite the overcommit '
                    'file %s: %s; the file set aside as %s holds this '
                    'configuration (ratio %s, the same CPU sets): taken '
                    'back and used', path,
                    getattr(exc, 'strerror', None) or exc, stale,
                    content.allocation_ratio)
        return True

    def _not_written(self, path: str,
                     content: typing.Optional[hostsettings.HostSettings],
                     exc: Exception, ratio: typing.Optional[float]) -> None:
        if content is not None and self._take_back(path, content, exc):
            self.ratio, self.written_ratio = content.allocation_ratio, ratio
            self.ok, self.error = True, None
            return
        if content is not None and overcommitfile.matches(path, content):
            # Same ratio and CPU sets as this process computed: right.
            self.ratio, self.written_ratio = content.allocation_ratio, ratio
            self.ok, self.error = True, None
            LOG.warning('nova-pinning-hooks: cannot rewrite the overcommit '
                        'file %s: %s; it holds this configuration (ratio '
                        '%s, the same CPU sets) and is used', path, exc,
                        content.allocation_ratio)
            return
        try:
            stale = overcommitfile.stale_path(path)
            what = ('the old one, which does not hold this configuration, '
                    'is set aside as %s' % stale
                    if overcommitfile.set_aside(path) or os.path.lexists(stale)
                    else 'there is no old one')
        except OSError as aside:
            if aside.errno == errno.EROFS:
                what = ('its filesystem is read-only: nothing there can be '
                        'set aside, and every reader refuses the file '
                        'until it is writable again')
            else:
                what = ('the old one could not be set aside (%s); passes '
                        'elsewhere may read it' % (aside.strerror or aside))
        message = ('cannot write the overcommit file %s: %s; %s; no pass '
                   'runs until it is written (tried again before each '
                   'pass)' % (path, getattr(exc, 'strerror', None) or exc,
                              what))
        self.ok = False
        if message != self.error:  # once, not every pass
            LOG.error('nova-pinning-hooks: %s', message)
        self.error = message
