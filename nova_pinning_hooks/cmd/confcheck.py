"""The configuration checks every command runs before it acts, and
that ``nova-pinning-status upgrade check`` reports.

* ``check_config_files``: the files given are small regular files,
  looked at before oslo.config opens them;
* ``check_known_options`` (``option_problems``): no option this
  package lacks in its sections, no section misspelt;
  ``deprecated_options``: the options set under an old name;
* ``validate_options`` (``value_problems``): every value parses and
  every float is finite.

Invariants: each check raises ``common.UsageError`` with its first
problem (exit 2, one line) and changes nothing; the ``*_problems``
functions list every problem, one line each, for the upgrade check.
"""

import errno
import glob
import os
import typing

from oslo_config import cfg

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.cmd.common import CONFIG_LIMIT
from nova_pinning_hooks.cmd.common import UsageError
from nova_pinning_hooks.cmd.common import first_line
from nova_pinning_hooks.host import safefs


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




def option_error(exc: BaseException) -> str:
    """oslo.config's "Value for option X from LocationInfo(...) is not
    valid: why" as "X: why" (the group is added by the caller)."""
    text = first_line(exc)
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
