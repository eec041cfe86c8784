"""``nova-pinning``: plan offline, or look at and re-bind the live host.

Sub-commands (the interface of ``plan`` is fixed; fields may be added):

* ``plan --snapshot FILE [--format table|json]``: plan a saved snapshot;
* ``snapshot [--connection URI]``: the live host as a snapshot;
* ``status [--connection URI] [--format table|json]``: the live host, its
  plan and whether the live pins match it;
* ``status ... --interval SECONDS``: also each guest's steal and CPU use
  from two samples of its vCPU counters that far apart (default 2; 0:
  no sample), and each NUMA node's vCPU demand against its pool;
* ``top [--interval SECONDS] [--once] [--threshold PCT]``: the same,
  refreshing in the terminal until ``q`` or Ctrl-C;
* ``metrics [--connection URI]``: the Prometheus metrics of the host
  (what nova-compute and ``agent`` write to ``[nova_pinning]
  metrics_textfile`` after each pass);
* ``exporter --listen ADDR:PORT``: serve those metrics on /metrics,
  read afresh at every scrape, until Ctrl-C;
* ``rebind [--connection URI] [--dry-run]``: one reconciler pass;
* ``release [--connection URI] [--dry-run]``: undo binding: every managed
  guest back on the CPUs nova gave it (``<vcpu cpuset>``, else all online
  CPUs); runs with ``enabled = false``;
* ``agent [--connection URI] [--listen ADDR:PORT] [--requests-on-stdin]
  [--summary-file FILE]``: the long-lived agent in the foreground
  (``service``), serving its metrics with its pass counters on
  ``--listen``, leaving what its passes planned, summed up for nova's
  scheduler, in ``--summary-file``; SIGTERM or SIGINT stop it (exit 0).

Exit status (``cmd.common``): 0 done, every change written; 1 a pass
failed or was cut short, or changes were skipped; 2 bad input or
configuration (one message on stderr, nothing printed on stdout, nothing
changed).
"""

import argparse
import json
import sys
import typing

from oslo_config import cfg
from oslo_log import log as logging

from nova_pinning_hooks.cmd import common
from nova_pinning_hooks.cmd import confcheck
from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import plan as plan_mod
from nova_pinning_hooks.engine import policy
from nova_pinning_hooks.engine import snapshot as snapshot_mod
from nova_pinning_hooks.observe import render
from nova_pinning_hooks.passes import settings as settings_mod

LOG = logging.getLogger(__name__)
PROG = 'nova-pinning'


UsageError = common.UsageError


def _add_parsers(
        subparsers: 'argparse._SubParsersAction[argparse.ArgumentParser]'
) -> None:
    p = subparsers.add_parser('plan', help='plan a saved host snapshot')
    p.add_argument('--snapshot', required=True, metavar='FILE',
                   help='snapshot JSON file ("-" for standard input)')
    p.add_argument('--format', choices=('table', 'json'), default='table')
    p.set_defaults(func=cmd_plan)
    for name, func, helptext in _LIVE_COMMANDS:
        sp = subparsers.add_parser(name, help=helptext)
        sp.add_argument('--connection', metavar='URI',
                        help='libvirt URI (default: [nova_pinning] '
                             'connection_uri)')
        if name == 'status':
            sp.add_argument('--format', choices=('table', 'json'),
                            default='table')
        if name in ('status', 'top'):
            sp.add_argument('--interval', type=common.seconds_arg,
                            default=2.0, metavar='SECONDS',
                            help='seconds between the two samples of '
                                 'vCPU counters behind the steal figures'
                                 '%s (default 2)' % (
                                     '; 0: no sample' if name == 'status'
                                     else ' (the refresh period)'))
        if name in ('rebind', 'release'):
            sp.add_argument('--dry-run', action='store_true',
                            help='plan and print the changes, write none')
        if name in ('exporter', 'agent'):
            sp.add_argument('--listen', required=name == 'exporter',
                            type=common.listen_arg, metavar='ADDR:PORT',
                            help='address and port to serve /metrics on '
                                 '(for example 127.0.0.1:9179 or '
                                 '[::1]:9179)%s' % (
                                     '; with the pass counters (default: '
                                     '[nova_pinning] metrics_listen)'
                                     if name == 'agent' else ''))
        if name == 'top':
            sp.add_argument('--once', action='store_true',
                            help='print one frame (after one interval) '
                                 'and exit: for scripts')
            sp.add_argument('--threshold', type=common.percent_arg,
                            metavar='PCT',
                            help='mark guests with at least this steal %% '
                                 '(default: [nova_pinning] '
                                 'steal_warning_percent)')
        if name == 'agent':
            sp.add_argument('--requests-on-stdin', action='store_true',
                            help='each line on standard input requests a '
                                 'pass; its end stops the agent (the '
                                 'worker nova-compute starts)')
            sp.add_argument('--summary-file', metavar='FILE',
                            help='after passes, write what they planned '
                                 'there, summed up for nova\'s scheduler '
                                 '(the worker nova-compute starts: its '
                                 '[nova_pinning] summary_file)')
        sp.set_defaults(func=func)


def read_snapshot_file(path: str) -> str:
    return common.read_input(path, sys.stdin.buffer)


def plan_snapshot(text: str, conf: cfg.ConfigOpts
                  ) -> tuple[snapshot_mod.Snapshot, plan_mod.Plan,
                             list[plan_mod.PinChange]]:
    """Snapshot text -> (snapshot, plan, changes); UsageError if bad."""
    try:
        snap = snapshot_mod.loads(
            text, **settings_mod.policy_overrides(conf))
        p = policy.make_plan(snap.host, snap.guests, snap.options)
    except (snapshot_mod.SnapshotError, policy.PolicyError) as exc:
        raise UsageError('bad snapshot: %s' % exc) from None
    return snap, p, plan_mod.changes(p, snap.guests)


def plan_output(text: str, conf: cfg.ConfigOpts, fmt: str = 'table',
                title: typing.Optional[str] = None) -> str:
    """Snapshot text -> the printed plan (table or JSON text)."""
    snap, p, change_list = plan_snapshot(text, conf)
    if fmt == 'json':
        # Compact: the C encoder is ten times faster than an indented one.
        return json.dumps(plan_mod.to_json(p, change_list,
                                           host=snap.host)) + '\n'
    return render.plan_table(p, snap.host, snap.guests, change_list,
                             title=title)


def cmd_plan(conf: cfg.ConfigOpts) -> str:
    args = conf.command
    return plan_output(read_snapshot_file(args.snapshot), conf, args.format,
                       title='plan of %s' % args.snapshot)


def _live(name: str
          ) -> typing.Callable[[cfg.ConfigOpts], common.CommandOutput]:
    def run(conf: cfg.ConfigOpts) -> common.CommandOutput:
        from nova_pinning_hooks.cmd import live
        # A name from _LIVE_COMMANDS, looked up late: cmd.live imports
        # libvirt, which plan and check never need.
        command: typing.Callable[[cfg.ConfigOpts], common.CommandOutput] = (
            getattr(live, name))
        return command(conf)
    return run


_LIVE_COMMANDS = (
    ('snapshot', _live('cmd_snapshot'), 'print the live host as a snapshot'),
    ('status', _live('cmd_status'),
     'show the live host, its plan and whether the pins match'),
    ('top', _live('cmd_top'),
     'watch each guest\'s steal beside its binding, refreshing'),
    ('metrics', _live('cmd_metrics'),
     'print the Prometheus metrics of the host (text format)'),
    ('exporter', _live('cmd_exporter'),
     'serve the metrics over HTTP (hosts without node_exporter)'),
    ('rebind', _live('cmd_rebind'), 'run one rebinding pass now'),
    ('release', _live('cmd_release'),
     'put every managed guest back on the CPUs nova gave it '
     '(after switching off)'),
    ('agent', _live('cmd_agent'),
     'keep the host bound: passes on libvirt events, in the foreground'),
)


def _register(conf: cfg.ConfigOpts,
              argv: typing.Optional[typing.Sequence[str]]) -> cfg.ConfigOpts:
    """``conf`` with every option and the sub-commands of the command
    line ``argv`` is parsed with."""
    conf_mod.register_opts(conf)
    logging.register_options(conf)
    # oslo.log writes to stdout unless told otherwise: stdout carries the
    # command's output (JSON), so log lines go to stderr. Not in
    # nova-compute's pass worker (``--requests-on-stdin``): it logs where
    # nova's own configuration says, as nova-compute does; with stderr as
    # well, each line came twice where nova-compute's stderr goes to its
    # log file (and its stdout, which oslo.log falls back to, is nova's).
    if '--requests-on-stdin' not in (argv or ()):
        conf.set_default('use_stderr', True)
    conf.register_cli_opt(cfg.SubCommandOpt('command', handler=_add_parsers,
                                            title='commands'))
    return conf


def parse_args(argv: typing.Optional[typing.Sequence[str]],
               conf: typing.Optional[cfg.ConfigOpts] = None
               ) -> cfg.ConfigOpts:
    conf = _register(conf or cfg.ConfigOpts(), argv)
    common.parse(conf, argv, common.PROJECT, PROG)
    return conf


def argument_parser() -> argparse.ArgumentParser:
    """The command line's parser, as ``main`` parses it
    (doc/source/cli/ is generated from it)."""
    return common.argument_parser(_register(cfg.ConfigOpts(), ()), PROG)


def main(argv: typing.Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        confcheck.check_config_files(argv, common.PROJECT, PROG)
        conf = parse_args(argv)
        try:
            confcheck.check_known_options(conf)
        except UsageError as exc:
            if conf.command.name != 'agent':
                raise
            # nova-compute starts the agent with its own configuration
            # and starts it again when it exits: a refusal would loop.
            sys.stderr.write('%s: warning: %s\n' % (PROG, exc))
        confcheck.validate_options(conf)
    except UsageError as exc:
        return common.error(PROG, exc, common.EXIT_USAGE)
    common.setup_logging(conf, PROG, nova_worker=bool(
        getattr(conf.command, 'requests_on_stdin', False)))
    if conf.command.func is not cmd_plan:  # planning needs no libvirt
        from nova_pinning_hooks.host import libvirtapi
        try:
            libvirtapi.quiet_errors()
        except libvirtapi.BindingMissing as exc:
            # An installation without the binding (no libvirt extra, no
            # python3-libvirt): what to install, in one line.
            return common.error(PROG, exc, common.EXIT_USAGE)
    return common.run(PROG, conf, lambda: conf.command.func(conf),
                      usage=(UsageError,), failed=(common.CommandFailed,))


if __name__ == '__main__':
    # Run the imported module, not __main__, so that the exception types
    # shared with cmd.live are the same objects.
    from nova_pinning_hooks.cmd import pinning as _pinning
    sys.exit(_pinning.main())
