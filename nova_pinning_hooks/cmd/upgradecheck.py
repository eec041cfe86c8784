"""``nova-pinning-status upgrade check``: what this host needs of the
installed release, before and after an upgrade or a rollback.

OpenStack's convention (``nova-status upgrade check``), with
oslo.upgradecheck: ``Checks`` is its ``UpgradeCommands``; each check
returns a ``Result`` whose code is ``SUCCESS``, ``WARNING`` (look: the
upgrade may be fine) or ``FAILURE`` (fix it first), and the command
exits with the worst code (0, 1, 2; 255: a check itself failed, oslo's).

The checks, in order (``Checks._upgrade_checks``):

* **nova**: this Python's nova has every part the package wraps
  (``nova.compat``, asked in a child process: ``nova.compatprobe``), and
  is of a tested release;
* **libvirt binding**: the binding is importable here;
* **configuration**: no option of ours unknown, no section of ours
  misspelt, no value refused (what ``nova-pinning`` and
  ``nova-pinning-isolate`` refuse with exit 2), no deprecated name;
* **notification driver**: ``driver = nova_pinning`` beside the
  drivers nova-compute had (doc/source/admin/nova.rst);
* **overcommit file**, **isolation state**, **isolation status**,
  **metrics textfile** (the files the package keeps): each is read by
  this release's own reader, or refused with that reader's one line
  (FAILURE); the textfile written by another release is a WARNING until
  the next pass rewrites it;
* **isolation**: the isolation state in force: applied on this boot or
  an earlier one, and whether the agent's published status is current;
* **pinned guests**: the running guests whose live XML still carries
  pins of ours, which must not leave the host: until none does, the
  driver line stays (admin/nova.rst, "Switch it off", step 3). WARNING with
  their count.

Invariants:

* read-only: nothing is written or created; libvirt is asked
  ``listAllDomains`` and ``XMLDesc`` alone;
* bounded: the nova probe runs ``PROBE_TIMEOUT`` seconds at most (then
  killed); each libvirt call ``[nova_pinning] libvirt_call_timeout``,
  all of them ``pass_timeout``;
* files are read as regular files of bounded size, never through a link
  (``safefs``, through each file's own reader);
* a check never raises for what it checks: an unreadable file, a refused
  value, an unreachable libvirtd are its result. An exception that
  escapes is a bug: exit 255 (``cmd.status``).
"""

import json
import os
import subprocess
import sys
import time
import typing

from oslo_config import cfg
from oslo_upgradecheck.upgradecheck import Code
from oslo_upgradecheck.upgradecheck import Result
from oslo_upgradecheck.upgradecheck import UpgradeCommands

from nova_pinning_hooks.cmd import common
from nova_pinning_hooks.cmd import confcheck
from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.host import libvirtapi
from nova_pinning_hooks.host import overcommitfile
from nova_pinning_hooks.host import virt
from nova_pinning_hooks.isolation import config as iso_config
from nova_pinning_hooks.isolation import state
from nova_pinning_hooks.isolation import statusfile
from nova_pinning_hooks.observe import textfile
from nova_pinning_hooks.observe import version
from nova_pinning_hooks.passes import settings as settings_mod

PROBE = 'nova_pinning_hooks.nova.compatprobe'
PROBE_TIMEOUT = 120.0  # seconds for this Python to import nova's driver
DRIVER = 'nova_pinning'  # nova.notifier.DRIVER_NAME, setup.cfg's name
NAMED = 10  # guests named in a result; the rest are counted


def _line(exc: BaseException) -> str:
    text = str(getattr(exc, 'strerror', None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_Check = typing.Callable[['Checks'], Result]


def _options(check: _Check) -> _Check:
    """A check that reads an option whose value oslo.config refuses says
    so (the "configuration" check fails on it) instead of raising."""
    def run(self: 'Checks') -> Result:
        try:
            return check(self)
        except cfg.Error as exc:
            return Result(Code.WARNING, 'not checked: %s (see '
                          '"configuration")' % confcheck.option_error(exc))
    run.__name__, run.__doc__ = check.__name__, check.__doc__
    return run


class Checks(UpgradeCommands):
    """The checks of ``nova-pinning-status upgrade check`` on ``conf``
    (parsed, with this package's options). ``paths``: where the host
    is read (tests: a temporary tree); ``python``: the interpreter that
    asks nova (this one)."""

    display_title = 'nova-pinning-hooks %s upgrade check' % (
        version.version_string())

    def __init__(self, conf: cfg.ConfigOpts,
                 paths: iso_config.HostPaths = iso_config.HOST,
                 python: str = sys.executable) -> None:
        super().__init__()
        self.conf = conf
        self.paths = paths
        self.python = python
        self._raw: typing.Optional[
            list[dict[str, dict[str, list[str]]]]] = None

    # -- what the configuration files say outside our sections -----------

    def _values(self, section: str, option: str) -> list[str]:
        """Every value the configuration files give ``[section] option``,
        in file order (oslo.config's multi-valued options add them up;
        for the others the last one wins). Our ConfigOpts does not
        register nova's or oslo.messaging's options: read as written."""
        if self._raw is None:
            self._raw = [confcheck.read_sections(path)
                         for path in confcheck.config_files(self.conf)]
        return [value for sections in self._raw
                for value in sections.get(section, {}).get(option, [])]

    def drivers(self) -> list[str]:
        """nova-compute's notification drivers, as oslo.messaging reads
        them (``driver``, a multi-valued option, and its old name)."""
        return [v.strip() for v in
                self._values('DEFAULT', 'notification_driver') +
                self._values('oslo_messaging_notifications', 'driver')
                if v.strip()]

    def libvirt_uri(self) -> tuple[str, str]:
        """(URI, where it comes from) of the libvirt whose guests the
        package binds: ``[nova_pinning] connection_uri`` when a file
        sets it, else nova's own (``[libvirt] connection_uri``, or the
        URI nova derives from ``virt_type``), as inside nova-compute."""
        group = conf_mod.PINNING_GROUP
        ours = self.conf.nova_pinning.connection_uri
        if self.conf.get_location('connection_uri', group).location not in (
                cfg.Locations.opt_default, cfg.Locations.set_default):
            return ours, '[%s] connection_uri' % group
        uri = (self._values('libvirt', 'connection_uri') or [''])[-1]
        if uri:
            return uri, "nova's [libvirt] connection_uri"
        virt_type = (self._values('libvirt', 'virt_type') or [''])[-1]
        if virt_type:
            return (conf_mod.nova_uri('', virt_type),
                    "nova's, for [libvirt] virt_type %s" % virt_type)
        return ours, '[%s] connection_uri' % group

    # -- the checks --------------------------------------------------------

    @_options
    def check_nova(self) -> Result:
        loaded = DRIVER in self.drivers()
        answer = self._probe()
        if isinstance(answer, str):
            return Result(Code.WARNING, 'nova not checked: %s' % answer)
        nova = answer.get('nova')
        if nova is None:
            if loaded:
                return Result(Code.FAILURE, (
                    '%s, yet the configuration loads the package into '
                    'nova-compute (driver = %s): run the nova-pinning-'
                    'status of nova-compute\'s own environment'
                    % (answer.get('error'), DRIVER)))
            return Result(Code.SUCCESS, (
                '%s: the package runs here outside nova-compute (the '
                'commands, the agents)' % answer.get('error')))
        lacking = answer.get('lacking') or []
        if lacking:
            return Result(Code.FAILURE, (
                'nova %s lacks %s%s: nova-compute would not activate the '
                'package (nothing hooked, no pin filter)' % (
                    nova, ', '.join(lacking),
                    ' (%s)' % answer['error'] if answer.get('error')
                    else '')))
        tested = 'nova %s to %s' % tuple(answer.get('tested_releases')
                                         or ('?', '?'))
        if not answer.get('tested'):
            return Result(Code.WARNING, (
                'nova %s has every part the package wraps, but this '
                'release was tested with %s only' % (nova, tested)))
        return Result(Code.SUCCESS, 'nova %s has every part the package '
                      'wraps (tested: %s)' % (nova, tested))

    def _probe(self) -> typing.Union[dict[str, typing.Any], str]:
        """``compatprobe``'s answer, or why there is none."""
        try:
            proc = subprocess.run(
                [self.python, '-m', PROBE], stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                cwd='/', check=False)
        except subprocess.TimeoutExpired:
            return ('%s did not answer within %g s (killed)'
                    % (self.python, PROBE_TIMEOUT))
        except OSError as exc:
            return 'cannot run %s: %s' % (self.python, _line(exc))
        lines = proc.stdout.strip().splitlines()
        try:
            answer = json.loads(lines[-1]) if lines else None
        except ValueError:
            answer = None
        if proc.returncode or not isinstance(answer, dict):
            err = proc.stderr.strip().splitlines()
            return '%s -m %s exited %d: %s' % (
                self.python, PROBE, proc.returncode,
                err[-1] if err else 'no answer')
        return answer

    def check_binding(self) -> Result:
        try:
            found = libvirtapi.binding_version()
        except libvirtapi.BindingMissing as exc:
            return Result(Code.FAILURE, str(exc))
        return Result(Code.SUCCESS, 'libvirt binding for libvirt %s'
                      % found)

    def check_configuration(self) -> Result:
        files = confcheck.config_files(self.conf)
        try:
            problems = confcheck.option_problems(self.conf)
            deprecated = confcheck.deprecated_options(self.conf)
        except common.UsageError as exc:
            return Result(Code.FAILURE, str(exc))
        problems += confcheck.value_problems(self.conf)
        if problems:
            return Result(Code.FAILURE, '; '.join(problems) + (
                ' (nova-pinning and nova-pinning-isolate refuse it: '
                'exit 2)'))
        if deprecated:
            return Result(Code.WARNING, '; '.join(deprecated) + (
                ' (still read; the old name goes after one SLURP '
                'release)'))
        if not files:
            return Result(Code.WARNING, 'no configuration file read: '
                          "every option at its default (give nova-compute's"
                          ', --config-file /etc/nova/nova.conf)')
        return Result(Code.SUCCESS, 'read %s: every option of ours known '
                      'and valid' % ', '.join(files))

    @_options
    def check_driver(self) -> Result:
        drivers = self.drivers()
        others = [d for d in drivers if d not in (DRIVER, 'noop')]
        off = '' if self.conf.nova_pinning.enabled else (
            ' ([nova_pinning] enabled = false: only the pin filter)')
        if DRIVER not in drivers:
            return Result(Code.SUCCESS, (
                'no [oslo_messaging_notifications] driver = %s: '
                'nova-compute does not load the package with this '
                'configuration (the agents and commands alone)' % DRIVER))
        if others:
            return Result(Code.SUCCESS, 'driver = %s beside %s: nova\'s '
                          'notifications still go there%s'
                          % (DRIVER, ', '.join(sorted(set(others))), off))
        wanted = [
            '[%s] %s' % key for key in (
                ('oslo_messaging_notifications', 'topics'),
                ('notifications', 'notify_on_state_change'),
                ('notifications', 'versioned_notifications_topics'))
            if any(v.strip() for v in self._values(*key))]
        if wanted:
            return Result(Code.WARNING, (
                'driver = %s is the only notification driver, yet %s is '
                'set: if this compute sent notifications (messagingv2, '
                'which kolla-ansible writes where a service consumes '
                'them), an override that names only %s stopped them; '
                'list both driver lines (doc/source/admin/nova.rst)%s'
                % (DRIVER, ' and '.join(wanted), DRIVER, off)))
        return Result(Code.SUCCESS, 'driver = %s alone: no other service '
                      'receives nova\'s notifications from this compute%s'
                      % (DRIVER, off))

    @_options
    def check_overcommit_file(self) -> Result:
        group = self.conf.nova_pinning
        path = group.overcommit_file
        if not (os.path.lexists(path) or os.path.lexists(
                overcommitfile.stale_path(path))):
            if group.allocation_ratio is not None:
                return Result(Code.SUCCESS, (
                    '%s: none, not used ([nova_pinning] allocation_ratio = '
                    '%g)' % (path, group.allocation_ratio)))
            if not group.enabled:
                return Result(Code.SUCCESS, '%s: none, not needed (enabled '
                              '= false)' % path)
            return Result(Code.WARNING, (
                '%s: none yet; nova-compute writes it at its start, and no '
                'pass runs until then' % path))
        try:
            info = overcommitfile.read(path)
        except overcommitfile.OvercommitError as exc:  # names the file
            return Result(Code.FAILURE, str(exc))
        return Result(Code.SUCCESS, '%s: version %d, ratio %g (%s), written '
                      '%s' % (path, overcommitfile.VERSION,
                              info.allocation_ratio,
                              info.ratio_source or 'source unknown',
                              info.written_at or 'at an unknown time'))

    @_options
    def check_isolation_state(self) -> Result:
        path = self.conf.nova_pinning_isolation.state_file
        try:
            st = state.load(path)
        except state.StateError as exc:  # it names the file
            return Result(Code.FAILURE, str(exc))
        if st is None:
            return Result(Code.SUCCESS, '%s: none' % path)
        return Result(Code.SUCCESS, '%s: version %d' % (path, state.VERSION))

    @_options
    def check_isolation_status(self) -> Result:
        state_file = self.conf.nova_pinning_isolation.state_file
        path = statusfile.path_for(state_file)
        found = statusfile.read(state_file, self.paths.proc)
        if found.get('error'):  # it names the file
            return Result(Code.FAILURE, str(found['error']))
        if not found.get('status_written'):
            return Result(Code.SUCCESS, '%s: none' % path)
        return Result(Code.SUCCESS, '%s: version %d' % (
            path, statusfile.VERSION))

    @_options
    def check_textfile(self) -> Result:
        path = self.conf.nova_pinning.metrics_textfile
        if not path:
            return Result(Code.SUCCESS, 'not configured ([nova_pinning] '
                          'metrics_textfile)')
        try:
            writer = textfile.written_by(path)
        except FileNotFoundError:
            return Result(Code.SUCCESS, '%s: none yet (written after each '
                          'pass)' % path)
        except (OSError, ValueError) as exc:  # it names the file
            return Result(Code.FAILURE, _line(exc))
        ours = version.version_string()
        if writer == ours:
            return Result(Code.SUCCESS, '%s: written by %s' % (path, ours))
        return Result(Code.WARNING, (
            '%s: written by %s, this is %s: the next pass rewrites it (if it '
            'does not, no pass runs)' % (
                path, writer or 'a release before 1.0.0', ours)))

    @_options
    def check_isolation(self) -> Result:
        state_file = self.conf.nova_pinning_isolation.state_file
        try:
            st = state.load(state_file)
        except state.StateError:
            return Result(Code.WARNING, 'not checked: the isolation state '
                          'is refused (see "isolation state")')
        published = statusfile.read(state_file, self.paths.proc)
        if st is None:
            if published.get('status_written') and \
                    published.get('state') == 'applied':
                return Result(Code.WARNING, (
                    'no isolation state, yet %s says "applied" (%s s old): '
                    'left behind by an undo that does not remove it (1.0.0 '
                    'after a rollback), or written by an agent with another '
                    'state_file; where no agent runs, remove it' % (
                        statusfile.path_for(state_file),
                        published.get('status_age', '?'))))
            return Result(Code.SUCCESS, 'not applied')
        applied = 'applied (%s, CPUs %s, %d processes recorded)' % (
            st['mode'], st.get('cpus'), len(st['moved']))
        if state.from_earlier_boot(st, self.paths.proc):
            return Result(Code.WARNING, (
                '%s before the last reboot, which undid it: "nova-pinning-'
                'isolate watch" (its service) applies it again, "undo" '
                'removes the state file' % applied))
        if published.get('error') and not published.get('status_written'):
            return Result(Code.WARNING, '%s; the agent\'s status is '
                          'refused (see "isolation state")' % applied)
        if not published.get('status_written'):
            return Result(Code.WARNING, (
                '%s, but the agent published no status: applied by an '
                'older release (1.0.0 published none); "watch" publishes '
                'it at every sweep, and the metrics and nova-pinning '
                'status read it' % applied))
        if published.get('earlier_boot') or published.get('status_stale'):
            return Result(Code.WARNING, (
                '%s; the agent\'s status is %s s old, older than %d sweeps '
                'of %s s: is "nova-pinning-isolate watch" running?' % (
                    applied, published.get('status_age', '?'),
                    statusfile.STALE_SWEEPS,
                    published.get('status_sweep_interval'))))
        trouble = [str(why) for why in (published.get('error'),
                                        published.get('backend_error'))
                   if why]
        if published.get('state') != 'applied' or trouble:
            return Result(Code.WARNING, '%s; the agent published "%s"%s' % (
                applied, published.get('state'),
                ': %s' % '; '.join(trouble) if trouble else ''))
        return Result(Code.SUCCESS, '%s; the agent published its status %s '
                      's ago' % (applied, published.get('status_age')))

    @_options
    def check_cgroup_v1(self) -> Result:
        """The isolation's cgroup v1 mode, deprecated: where it would run
        (the mode here, or the mode a state records)."""
        opts = iso_config.read(self.conf)
        mode = iso_config.mode_here(opts, self.paths)
        try:
            st = state.load(opts.state_file)
        except state.StateError:
            st = None  # "isolation state" says why
        recorded = st['mode'] if st else None
        deprecated = (
            'cgroup v1 is deprecated since %s and removed in %s: boot this '
            'host with cgroup v2 and systemd (cgroup_mode systemd) before '
            'upgrading to %s (doc/source/admin/isolation.rst, "cgroup v1")'
            % (iso_config.V1_DEPRECATED_IN, iso_config.V1_REMOVED_IN,
               iso_config.V1_REMOVED_IN))
        if recorded == state.CgroupMode.V1:
            return Result(Code.WARNING, 'the isolation is applied in cgroup '
                          'v1 mode; %s' % deprecated)
        if mode != state.CgroupMode.V1:
            return Result(Code.SUCCESS, 'cgroup_mode %s: %s' % (
                opts.cgroup_mode, mode))
        if not opts.reserved_cpus:
            return Result(Code.SUCCESS, 'a cgroup v1 host, but no isolation '
                          '([nova_pinning] reserved_cpus unset)')
        why = ('cgroup_mode v1' if opts.cgroup_mode == state.CgroupMode.V1
               else 'cgroup_mode auto on a host without cgroup v2 and '
               'systemd')
        return Result(Code.WARNING, 'the isolation runs in cgroup v1 mode '
                      '(%s); %s' % (why, deprecated))

    @_options
    def check_pinned_guests(self) -> Result:
        uri, source = self.libvirt_uri()
        host = virt.connect(uri, settings_mod.read(self.conf).host)
        host.set_deadline(time.monotonic() +
                          self.conf.nova_pinning.pass_timeout)
        try:
            found = host.pinned_guests()
        except Exception as exc:
            if isinstance(exc, libvirtapi.BindingMissing):
                return Result(Code.WARNING,
                              'not checked: no libvirt binding')
            if not libvirtapi.is_host_error(exc):
                raise
            return Result(Code.WARNING, 'not checked: libvirt at %s (%s): '
                          '%s' % (uri, source, _line(exc)))
        finally:
            host.close()
        if not found:
            return Result(Code.SUCCESS, (
                'no running guest at %s (%s) carries a pin of ours in its '
                'live XML' % (uri, source)))
        names = sorted(found)
        named = ', '.join(names[:NAMED]) + (
            ' and %d more' % (len(names) - NAMED) if len(names) > NAMED
            else '')
        keep = ('keep [oslo_messaging_notifications] driver = %s' % DRIVER
                if DRIVER in self.drivers() else
                'this configuration has no driver = %s: if it is '
                'nova-compute\'s, put the line back (with enabled = false) '
                'before any of them live-migrates' % DRIVER)
        return Result(Code.WARNING, (
            '%d running guest%s at %s carr%s pins of ours in the live XML: '
            '%s; %s until each has restarted (hard reboot, stop and start, '
            'resize, cold or live migration, shelve and unshelve: '
            'doc/source/admin/nova.rst, "Switch it off", step 3)' % (
                len(names), '' if len(names) == 1 else 's', uri,
                'ies' if len(names) == 1 else 'y', named, keep)))

    _upgrade_checks = (
        ('nova', check_nova),
        ('libvirt binding', check_binding),
        ('configuration', check_configuration),
        ('notification driver', check_driver),
        ('overcommit file', check_overcommit_file),
        ('isolation state', check_isolation_state),
        ('isolation status', check_isolation_status),
        ('metrics textfile', check_textfile),
        ('isolation', check_isolation),
        ('cgroup v1', check_cgroup_v1),
        ('pinned guests', check_pinned_guests),
    )

