"""What the commands share: their errors and the files they are given.

Exit status of every command (``doc/source/reference/security.rst``):

* 0: done; for a pass, every planned change was written;
* 1: the work failed or was done only in part (libvirt unreachable or
  hung, a pass cut short, changes skipped, cgroupfs refused): one line on
  stderr; a pass still prints what it did;
* 2: bad input or configuration, found before anything changed: one line
  on stderr, nothing on stdout;
* 130: interrupted (SIGINT).

``run`` maps a command's outcome to these, for every command.
"""

import argparse
import logging
import sys
import typing

from oslo_config import cfg
from oslo_log import log as oslo_log

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.engine import snapshot
from nova_pinning_hooks.host import safefs
from nova_pinning_hooks.observe import httpserve
from nova_pinning_hooks.observe import version

CONFIG_LIMIT = 1 << 20    # bytes in one configuration file
SNAPSHOT_LIMIT = snapshot.MAX_BYTES
# What a sub-command of ``nova-pinning`` returns: the text for stdout, or
# (that text, exit status, the one line for stderr).
CommandOutput = typing.Union[str, tuple[str, int, str]]


# oslo.config's project: /etc/nova-pinning-hooks/nova-pinning-hooks.conf
# and the like are read when no --config-file is given.
PROJECT = 'nova-pinning-hooks'

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad input or configuration: one line, exit status 2."""


class CommandFailed(Exception):
    """The work failed (or was done in part): one line, exit status 1."""


MAX_INTERVAL = 3600.0  # seconds a command samples or refreshes at most


def number_arg(text: str, high: float, unit: str) -> float:
    """A finite number in plain ASCII digits, 0 to ``high`` (``nan``,
    ``inf``, ``-1``, ``1e9`` refused), for argparse types."""
    import argparse
    import math
    import re
    if not re.fullmatch(r'[0-9]{1,9}(\.[0-9]{0,9})?|\.[0-9]{1,9}',
                        text or '', re.ASCII):
        raise argparse.ArgumentTypeError('%.40r is not a number of %s'
                                         % (text, unit))
    value = float(text)
    if not (math.isfinite(value) and 0 <= value <= high):
        raise argparse.ArgumentTypeError('%s %s is out of range (0 to %g)'
                                         % (text, unit, high))
    return value


def seconds_arg(text: str) -> float:
    """An argparse type: 0 to ``MAX_INTERVAL`` seconds."""
    return number_arg(text, MAX_INTERVAL, 'seconds')


def percent_arg(text: str) -> float:
    """An argparse type: 0 to 100 percent."""
    return number_arg(text, 100.0, 'percent')


def listen_arg(text: str) -> tuple[str, int]:
    """An argparse type: ``ADDR:PORT`` or ``[IPv6]:PORT`` with a literal
    IP address and a port 1-65535 -> (address, port)."""
    import argparse

    try:
        return httpserve.parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def read_input(path: str, stdin: typing.Optional[typing.BinaryIO] = None
               ) -> str:
    """A snapshot file's text ("-": standard input), bounded in size,
    a regular file only. Raises ``UsageError``."""
    try:
        if path == '-':
            assert stdin is not None  # "-" is read from ``stdin``
            data = safefs.read_stream(stdin, SNAPSHOT_LIMIT, 'input')
        else:
            data = safefs.read_file(path, SNAPSHOT_LIMIT, 'snapshot')
    except OSError as exc:
        raise UsageError('cannot read snapshot %s: %s'
                         % (path, exc.strerror or exc)) from None
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise UsageError('snapshot %s is not UTF-8: %s'
                         % (path, exc.reason)) from None


def parse(conf: cfg.ConfigOpts, argv: typing.Optional[typing.Sequence[str]],
          project: str, prog: str) -> None:
    """``conf(argv)``; every failure a one-line ``UsageError``.

    argparse prints a usage text and an error line, then exits 2; oslo
    exits 1 with a message for a bad value of a command-line option set
    in a configuration file (``debug = maybe``). Both become the one
    line of a UsageError; ``--help`` still prints its text and exits 0,
    and so does ``--version`` (the installed version, on stdout).
    """
    import contextlib
    import io
    import sys

    from oslo_config import cfg

    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            conf(argv, project=project, prog=prog,
                 version=version.version_string())
    except SystemExit as exc:
        if exc.code in (0, None):
            sys.stderr.write(captured.getvalue())
            raise
        lines = [ln for ln in captured.getvalue().splitlines()
                 if ln.strip()]
        if isinstance(exc.code, str):
            lines.append(exc.code)
        message = lines[-1] if lines else 'bad command line'
        raise UsageError(message.partition(': error: ')[2] or message
                         ) from None
    except cfg.Error as exc:
        raise UsageError(first_line(exc)) from None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError too
        raise UsageError('cannot read the configuration: %s'
                         % first_line(exc)) from None
    sys.stderr.write(captured.getvalue())  # warnings, if any


def argument_parser(conf: cfg.ConfigOpts, prog: str
                    ) -> argparse.ArgumentParser:
    """The argparse parser that ``parse`` (``conf(argv)``) parses a
    command line with, built without parsing anything: oslo.config makes
    it only inside ``ConfigOpts.__call__``, whose steps up to the parse
    these are (``_pre_setup``, ``_setup``, each command-line option
    added), with no default configuration file. For the command
    reference (doc/source/cli/), generated from it; tests/unit/cmd
    compares it with what ``parse`` accepts."""
    conf.clear()
    prog, files, dirs = conf._pre_setup(
        PROJECT, prog, version.version_string(), None, None, None, [], [])
    conf._setup(PROJECT, prog, version.version_string(), None, files, dirs,
                True)
    parser = conf._oparser
    for opt, group in conf._all_cli_opts():
        opt._add_to_cli(parser, group)
    parser.initialize_parser_arguments()
    result: argparse.ArgumentParser = parser
    return result


# oslo.log's options that send log records elsewhere than stderr, and
# the values that keep them there. A command run as root with
# nova.conf (``nova-pinning-status upgrade check``, ``nova-pinning
# status``, as the docs say) opened nova's ``log_dir`` (the nova
# user's: kolla's /var/log/kolla/nova) with O_APPEND|O_CREAT,
# following links planted there, and ``log_config_append`` names any
# handler at all (issue 48, R5-M2). Set whatever the files or the
# command line say: the commands log to stderr, as documented.
NO_LOG_FILES = {'log_config_append': None, 'log_file': None,
                'log_dir': None, 'watch_log_file': False,
                'use_syslog': False, 'use_journal': False,
                'use_eventlog': False, 'publish_errors': False}
STDERR_ONLY = dict(NO_LOG_FILES, use_stderr=True)


def setup_logging(conf: cfg.ConfigOpts, prog: str,
                  nova_worker: bool = False) -> None:
    """oslo.log's set-up, to stderr alone (``STDERR_ONLY``). Not for
    nova-compute's pass worker (``nova_worker``), which logs where
    nova's configuration says, as nova-compute does: nova-compute starts
    it with its own user and configuration, so the worker writes only
    what nova-compute itself may and does write (as root too, where a
    deployment runs nova-compute as root; tests/nova finds its pass
    lines in nova's log_file there). Without ``--debug`` no log record
    prints a traceback: its exception is appended to its one line
    instead."""
    import logging as std_logging

    from oslo_log import log as logging

    overrides = {} if nova_worker else STDERR_ONLY
    for name, value in overrides.items():
        if name in conf:
            conf.set_override(name, value)
    logging.setup(conf, prog)
    if not conf.debug:
        for handler in std_logging.getLogger().handlers:
            handler.addFilter(_OneLineRecords())


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text, or its type's name."""
    text = str(exc)
    return text.splitlines()[0] if text.strip() else type(exc).__name__


def _exception_line(exc: BaseException) -> str:
    return ('%s: %s' % (type(exc).__name__, first_line(exc))
            if str(exc).strip() else type(exc).__name__)


class _OneLineRecords:
    """A logging filter: a record's exception becomes text after its
    message, never a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = '%s: %s' % (record.getMessage(),
                                     _exception_line(record.exc_info[1]))
            record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


def new_conf() -> cfg.ConfigOpts:
    """A configuration with the package's options and oslo.log's, that
    logs to stderr: stdout is the command's output (JSON)."""
    conf = cfg.ConfigOpts()
    conf_mod.register_opts(conf)
    oslo_log.register_options(conf)
    conf.set_default('use_stderr', True)
    return conf


def error(prog: str, what: object, status: int) -> int:
    """The one line of an error on stderr; returns ``status``."""
    sys.stderr.write('%s: error: %s\n' % (prog, what))
    return status


def run(prog: str, conf: cfg.ConfigOpts,
        command: typing.Callable[[], CommandOutput],
        usage: tuple[type[Exception], ...] = (),
        failed: tuple[type[Exception], ...] = (),
        unexpected: int = EXIT_FAILED) -> int:
    """Run ``command``, write its text to stdout, and return the exit
    status: the status it returned (its message as the error line), else
    0; ``EXIT_USAGE`` for the exceptions of ``usage``, ``EXIT_FAILED``
    for those of ``failed``, ``EXIT_INTERRUPTED`` for an interrupt, and
    ``unexpected`` for anything else (``report_unexpected``)."""
    try:
        output = command()
    except usage as exc:
        return error(prog, exc, EXIT_USAGE)
    except failed as exc:
        return error(prog, exc, EXIT_FAILED)
    except KeyboardInterrupt:
        return error(prog, 'interrupted', EXIT_INTERRUPTED)
    except Exception as exc:
        report_unexpected(prog, conf, exc)
        return unexpected
    if isinstance(output, str):
        output = (output, 0, '')
    text, status, message = output
    sys.stdout.write(text)
    if message:
        sys.stdout.flush()  # the text first, then its error line
        error(prog, message, status)
    return status


def report_unexpected(prog: str, conf: cfg.ConfigOpts,
                      exc: BaseException) -> int:
    """One line for a failure nobody foresaw; the traceback only with
    ``--debug``. Returns exit status 1."""
    import traceback
    if getattr(conf, 'debug', False):
        traceback.print_exc(file=sys.stderr)
    sys.stderr.write('%s: error: %s: %s\n' % (
        prog, type(exc).__name__, str(exc).splitlines()[0] if str(exc)
        else 'unexpected failure'))
    return 1
