"""The install pages' steps, read from their source, in the page's order:
what tests/cloud/test_install_guide.py runs against the real cloud, and
the figures of the pages (length, steps). Standard library only.

The markup (doc/source/install/*.rst), invisible to a reader but for the
rendered blocks themselves:

* ``.. code-block:: console`` with ``:class: nph-vars``: the deployment's
  names, as shell assignments (``# NAME=value``); a test gives each of
  these names its cloud's value instead, and nothing else;
* ``.. code-block:: console`` with ``:class: nph-run``: commands run as
  the page shows them: each line that starts with the root prompt
  ``# `` (continued while it ends in ``\\``); other lines would be
  sample output;
* ``.. code-block:: ini`` with ``:class: nph-conf-compute`` or
  ``nph-conf-scheduler``: configuration the page tells the reader to
  write for that service; the cloud's file for it must hold the same
  after the next cloud step;
* an rst comment ``.. nph-cloud: ARGS``: the step just above (a restart,
  ``kolla-ansible``), as this cloud does it: ``tools/cloud.sh ARGS``.

Any other literal block (image builds, ``kolla-ansible``, ``systemctl``)
is not run.
"""

import collections
import re

Step = collections.namedtuple('Step', 'kind lines where')
# kind: 'vars', 'run', 'conf-compute', 'conf-scheduler', 'cloud'; lines:
# the commands (joined continuation lines), the ini lines, or the cloud's
# arguments; where: the line number in the page.

_BLOCK = re.compile(r'^\.\. code-block::\s*(\S+)\s*$')
_OPTION = re.compile(r'^\s+:(\w[\w-]*):\s*(.*)$')
_CLOUD = re.compile(r'^\.\. nph-cloud:\s*(.+?)\s*$')
_ASSIGN = re.compile(r'(?:^|\s)([A-Z_][A-Z0-9_]*)=')


def _block(lines, start):
    """(options, content lines, next index) of the directive whose
    ``.. code-block::`` line is ``lines[start]``."""
    i = start + 1
    options = {}
    while i < len(lines) and _OPTION.match(lines[i]):
        name, value = _OPTION.match(lines[i]).groups()
        options[name] = value
        i += 1
    content = []
    while i < len(lines) and (not lines[i].strip() or
                              lines[i].startswith(' ')):
        content.append(lines[i])
        i += 1
    while content and not content[-1].strip():
        content.pop()
    indent = min((len(ln) - len(ln.lstrip()) for ln in content
                  if ln.strip()), default=0)
    return options, [ln[indent:] for ln in content], i


def commands(content):
    """The commands of a console block: lines after the root prompt
    ``# ``, continuation lines joined."""
    found = []
    open_ = False
    for line in content:
        if open_:
            found[-1] = found[-1][:-1].rstrip() + ' ' + line.strip()
        elif line.startswith('# '):
            found.append(line[2:].strip())
        else:
            continue
        open_ = found[-1].endswith('\\')
    return found


def steps(path):
    """Every marked step of an install page, in order."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    found = []
    i = 0
    while i < len(lines):
        cloud = _CLOUD.match(lines[i])
        if cloud:
            found.append(Step('cloud', cloud.group(1).split(), i + 1))
            i += 1
            continue
        block = _BLOCK.match(lines[i])
        if not block:
            i += 1
            continue
        options, content, after = _block(lines, i)
        classes = options.get('class', '').split()
        for cls in classes:
            if cls in ('nph-vars', 'nph-run'):
                found.append(Step(cls[4:], commands(content), i + 1))
            elif cls in ('nph-conf-compute', 'nph-conf-scheduler'):
                found.append(Step(cls[4:], content, i + 1))
        i = after
    return found


def variables(step):
    """The names a ``vars`` step assigns, in order."""
    names = []
    for command in step.lines:
        code = re.split(r'\s{2,}#', command)[0]  # its comment aside
        names.extend(_ASSIGN.findall(code))
    return names


def ini(lines):
    """{section: {option: [values]}} of ini lines (a repeated option:
    each value, as oslo.config reads a multi-valued option)."""
    sections = {}
    current = None
    for line in lines:
        line = line.strip()
        if not line or line.startswith(('#', ';')):
            continue
        if line.startswith('[') and line.endswith(']'):
            current = sections.setdefault(line[1:-1], {})
            continue
        name, _, value = line.partition('=')
        if current is None or not _:
            raise ValueError('not an ini line: %r' % line)
        current.setdefault(name.strip(), []).append(value.strip())
    return sections


def figures(path, start=None, end=None):
    """(lines, literal blocks) of a page, or of its part from the line
    that says ``start`` to the one before ``end``: what a reader reads,
    and what a reader acts on (a command or a configuration snippet, one
    block each; the reader's own names, ``nph-vars``, aside)."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    if start is not None:
        lines = lines[lines.index(start):]
    if end is not None:
        lines = lines[:lines.index(end)]
    count = 0
    i = 0
    while i < len(lines):
        block = _BLOCK.match(lines[i])
        if block:
            options, _, i = _block(lines, i)
            count += 'nph-vars' not in options.get('class', '')
        elif lines[i].rstrip().endswith('::') and \
                not lines[i].lstrip().startswith('.. '):
            count += 1
            i += 1
        else:
            i += 1
    return len(lines), count
