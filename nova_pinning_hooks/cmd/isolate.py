"""``nova-pinning-isolate``: keep host processes on the reserved CPUs.

    nova-pinning-isolate apply    # confine now (one sweep)
    nova-pinning-isolate watch    # apply, then follow daemon restarts
    nova-pinning-isolate status
    nova-pinning-isolate undo     # put every process back

Exit status: 0 done, 1 failed, 2 configuration refused (nothing changed).
"""

import json
import signal
import sys
import threading

from oslo_config import cfg
from oslo_log import log as logging

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.isolation import agent
from nova_pinning_hooks.isolation import backends

PROG = 'nova-pinning-isolate'


def _add_parsers(subparsers):
    for name in ('apply', 'watch', 'status', 'undo'):
        subparsers.add_parser(name)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    logging.register_options(conf)
    conf.register_cli_opt(cfg.SubCommandOpt('command', handler=_add_parsers))
    try:
        conf(argv, project='nova-pinning-hooks', prog=PROG)
    except cfg.Error as exc:
        sys.stderr.write('%s: error: %s\n' % (PROG, exc))
        return 2
    logging.setup(conf, PROG)
    try:
        iso = agent.Isolator(conf)
    except agent.ConfigError as exc:
        sys.stderr.write('%s: error: %s\n' % (PROG, exc))
        return 2
    command = conf.command.name
    try:
        if command == 'apply':
            print('%d processes moved to CPUs %s'
                  % (iso.apply(), conf.nova_pinning.reserved_cpus))
        elif command == 'watch':
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            signal.signal(signal.SIGINT, lambda *_: stop.set())
            iso.watch(stop)
        elif command == 'undo':
            iso.undo()
            print('undone')
        else:
            print(json.dumps(iso.status(), indent=1, sort_keys=True))
    except (backends.BackendError, OSError) as exc:
        sys.stderr.write('%s: error: %s\n' % (PROG, exc))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
