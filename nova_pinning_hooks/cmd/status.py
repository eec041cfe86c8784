"""``nova-pinning-status``: OpenStack's status command for this package.

    nova-pinning-status [--config-file FILE ...] upgrade check [--json]

Run before and after an upgrade of the package (or of nova, or a
rollback), as root, with nova-compute's configuration: the checks of
``cmd.upgradecheck``, as a table (or JSON), then the exit status of
oslo.upgradecheck: 0 every check passed; 1 a warning (look: the upgrade
may be fine); 2 a failure (fix it first), or bad input: a bad command
line or a configuration file that cannot be read (one line on stderr,
nothing on stdout); 255 a check itself failed (one line; the traceback
with ``--debug``).

oslo.upgradecheck's ``main(conf, project, upgrade_command)`` is not
called: it parses the command line with ``conf()`` itself, so a FIFO
given as a configuration file hangs it, argparse's usage lines and a
bad value's traceback are not one line, and a failed check prints its
traceback on stdout. Its parser (``register_cli_options``), its
``UpgradeCommands.check`` (the table, ``--json``) and its exit codes
are used as they are.
"""

import argparse
import sys
import typing

from oslo_config import cfg
from oslo_upgradecheck import upgradecheck as oslo_upgradecheck

from nova_pinning_hooks.cmd import common
from nova_pinning_hooks.cmd import confcheck
from nova_pinning_hooks.cmd import upgradecheck

PROG = 'nova-pinning-status'
INTERNAL_ERROR = 255  # oslo.upgradecheck's: not a check's code


def _new_conf() -> tuple[cfg.ConfigOpts, upgradecheck.Checks]:
    conf = common.new_conf()
    checks = upgradecheck.Checks(conf)
    oslo_upgradecheck.register_cli_options(conf, checks)
    return conf, checks


def argument_parser() -> argparse.ArgumentParser:
    """The command line's parser, as ``main`` parses it
    (doc/source/cli/ is generated from it)."""
    return common.argument_parser(_new_conf()[0], PROG)


def main(argv: typing.Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    conf, checks = _new_conf()
    try:
        confcheck.check_config_files(argv, common.PROJECT, PROG)
        common.parse(conf, argv, common.PROJECT, PROG)
        if (conf.command.name, getattr(conf.command, 'check', None)) != (
                'upgrade', 'check'):
            raise common.UsageError('the command is "upgrade check"')
    except common.UsageError as exc:
        return common.error(PROG, exc, common.EXIT_USAGE)
    common.setup_logging(conf, PROG)
    # What oslo's main() sets: check() reads --json from it.
    oslo_upgradecheck.CONF = conf

    def check() -> common.CommandOutput:
        # oslo.upgradecheck prints its own report: the status is its code.
        return '', int(checks.check()), ''
    return common.run(PROG, conf, check, unexpected=INTERNAL_ERROR)


if __name__ == '__main__':
    sys.exit(main())
