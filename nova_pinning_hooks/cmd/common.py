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
import errno
import glob
import logging
import os
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


def _config_args(argv: typing.Iterable[str]
                 ) -> tuple[list[str], list[str]]:
    """The --config-file and --config-dir values on a command line."""
    files: list[str]
    dirs: list[str]
    files, dirs = [], []
    args = iter(argv)
    for arg in args:
        for flag, into in (('--config-file', files), ('--config-dir', dirs)):
            if arg == flag:
                value = next(args, None)
                if value is not None:
                    into.append(value)
            elif arg.startswith(flag + '='):
                into.append(arg[len(flag) + 1:])
    return files, dirs


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


def check_config_files(argv: typing.Iterable[str], project: str,
                       prog: str) -> None:
    """Refuse, before oslo.config reads them, configuration files that
    are not small regular files (a FIFO would hang the command, a device
    or a huge file exhaust its memory). Raises ``UsageError``."""
    from oslo_config import cfg
    files, dirs = _config_args(argv)
    if not files:
        files = cfg.find_config_files(project=project, prog=prog)
    if not dirs:
        dirs = cfg.find_config_dirs(project=project, prog=prog)
    for d in dirs:
        files += sorted(glob.glob(os.path.join(glob.escape(d), '*.conf')))
    for path in files:
        if path == os.devnull:
            continue  # the usual way to read no configuration at all
        try:
            safefs.check_readable_config(path, CONFIG_LIMIT)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                continue  # oslo.config reports a missing file itself
            raise UsageError(str(exc.strerror or exc)) from None


def _names() -> tuple[dict[str, set[str]],
                      dict[tuple[str, str], str]]:
    """({section: option names it may hold}, {(section, option): why it
    is deprecated}) of this package's options: an option renamed keeps
    its old name (``deprecated_name``, ``deprecated_group``) for at
    least one SLURP cycle (CONTRIBUTING.rst), and a file that still uses
    it is not refused, only told."""
    known: dict[str, set[str]] = {}
    deprecated: dict[tuple[str, str], str] = {}
    for group, opts in conf_mod.list_opts():
        for opt in opts:
            known.setdefault(group.name, set()).add(opt.dest)
            if opt.deprecated_for_removal:
                deprecated[group.name, opt.dest] = (
                    '[%s] %s is deprecated for removal%s' % (
                        group.name, opt.dest,
                        ': %s' % opt.deprecated_reason
                        if opt.deprecated_reason else ''))
            for old in opt.deprecated_opts:
                section = old.group or group.name
                name = (old.name or opt.dest).replace('-', '_')
                if section == 'DEFAULT' or (section, name) == (
                        group.name, opt.dest):
                    continue  # DEFAULT is nova's: not read here
                known.setdefault(section, set()).add(name)
                deprecated[section, name] = '[%s] %s is deprecated: use ' \
                    '[%s] %s' % (section, name, group.name, opt.dest)
    return known, deprecated


def config_files(conf: cfg.ConfigOpts) -> list[str]:
    """The configuration files ``conf`` was parsed from, in order
    (``--config-dir``'s ``*.conf`` after them, sorted), that exist."""
    files = list(conf.config_file or [])
    for d in conf.config_dir and [conf.config_dir] or []:
        files += sorted(glob.glob(os.path.join(glob.escape(d), '*.conf')))
    return [path for path in files
            if path != os.devnull and os.path.exists(path)]


def read_sections(path: str) -> dict[str, dict[str, list[str]]]:
    """{section: {option: [values]}} of one configuration file, as
    oslo.config's parser reads it (a repeated option: each value).
    Raises ``UsageError`` when it does not parse."""
    from oslo_config import cfg

    sections: dict[str, dict[str, list[str]]] = {}
    try:
        cfg.ConfigParser(path, sections).parse()
    except (OSError, cfg.ParseError) as exc:
        raise UsageError('%s: %s' % (path, exc)) from None
    return sections


def option_problems(conf: cfg.ConfigOpts) -> list[str]:
    """What ``check_known_options`` refuses, every instance of it, one
    line each: in a section of this package an option it does not have,
    or a section whose name looks like one of this package's and is not
    (``[isolation]`` for ``[nova_pinning_isolation]``). Other sections
    (a ``nova.conf`` holding our options beside nova's) are left alone.
    Raises ``UsageError`` for a file that does not parse."""
    import difflib

    own, _ = _names()
    problems = []
    for path in config_files(conf):
        for section, options in read_sections(path).items():
            if section in own:
                unknown = sorted(set(options) - own[section])
                if unknown:
                    problems.append('%s: [%s] has no option %s' % (
                        path, section, ', '.join(unknown)))
                continue
            if section == 'DEFAULT':
                continue
            name = section.lower()
            close = difflib.get_close_matches(name, own, n=1, cutoff=0.6)
            if close or 'pinning' in name or 'isolat' in name:
                guess = close[0] if close else (
                    'nova_pinning_isolation' if 'isolat' in name
                    else 'nova_pinning')
                problems.append('%s: unknown section [%s] (did you mean '
                                '[%s]?)' % (path, section, guess))
    return problems


def deprecated_options(conf: cfg.ConfigOpts) -> list[str]:
    """Each option of this package's that the configuration files set
    under a deprecated name, or that is deprecated for removal, one line
    each naming the file. Raises ``UsageError`` for a file that does not
    parse."""
    _, deprecated = _names()
    found = []
    for path in config_files(conf):
        for section, options in read_sections(path).items():
            for option in sorted(options):
                why = deprecated.get((section, option))
                if why:
                    found.append('%s: %s' % (path, why))
    return found


def check_known_options(conf: cfg.ConfigOpts) -> None:
    """Refuse configuration files that name, in a section of this
    package, an option it does not have, or that hold a section whose
    name looks like one of this package's and is not
    (``option_problems``): oslo.config ignores both, and a misspelt
    section made ``nova-pinning-isolate apply`` confine every process on
    the host with defaults. Raises ``UsageError`` naming the file,
    section and options (the first such problem)."""
    problems = option_problems(conf)
    if problems:
        raise UsageError(problems[0])


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
        raise UsageError(_first_line(exc)) from None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError too
        raise UsageError('cannot read the configuration: %s'
                         % _first_line(exc)) from None
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


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text.strip() else type(exc).__name__


def option_error(exc: BaseException) -> str:
    """oslo.config's "Value for option X from LocationInfo(...) is not
    valid: why" as "X: why" (the group is added by the caller)."""
    text = _first_line(exc)
    head, sep, why = text.partition(' is not valid: ')
    if sep and head.startswith('Value for option '):
        name = head[len('Value for option '):].split(' from ')[0]
        return '%s: %s' % (name, why)
    return text


def value_problems(conf: cfg.ConfigOpts) -> list[str]:
    """Every option value the configuration files give that oslo.config
    refuses, or a float that is not finite, one line each. oslo.config
    parses file values lazily: each option is read once here."""
    import math

    from oslo_config import cfg

    problems = []

    def check(group: typing.Optional[str], name: str,
              value: typing.Any) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            where = '[%s] %s' % (group or 'DEFAULT', name)
            problems.append('%s: %r is not a finite number' % (where, value))

    for name in list(conf):
        try:
            value = conf[name]
        except (cfg.Error, ValueError) as exc:
            problems.append('[DEFAULT] %s' % option_error(exc))
            continue
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for opt in list(value):
                try:
                    item = value[opt]
                except (cfg.Error, ValueError) as exc:
                    problems.append('[%s] %s' % (name, option_error(exc)))
                    continue
                check(name, opt, item)
        else:
            check(None, name, value)
    return problems


def validate_options(conf: cfg.ConfigOpts) -> None:
    """Read every option once, so a bad value in a configuration file is
    refused now (exit 2) rather than when first used, mid-command, as a
    traceback (``value_problems``: the first). Floats must also be
    finite: oslo.config's min/max let ``nan`` through."""
    problems = value_problems(conf)
    if problems:
        raise UsageError(problems[0])


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


def _exception_line(exc: BaseException) -> str:
    return ('%s: %s' % (type(exc).__name__, _first_line(exc))
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
