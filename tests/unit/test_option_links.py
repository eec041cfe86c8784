"""Every option an admin or install page names is a link to the
generated options reference (``:oslo.config:option:`group.name```, the
targets ``show-options`` makes in doc/source/configuration/options.rst,
as nova's admin pages do): an inline literal that names one of the
package's options (``name``, ``[group] name``, ``name = value``) is
refused. Literal blocks (configuration files, commands) are left alone.
"""

import os
import re

import testtools

from nova_pinning_hooks import conf

DOC = os.path.join(os.path.dirname(__file__), '..', '..', 'doc', 'source')
FOLDERS = ('admin', 'install')
_LITERAL = re.compile(r'``([^`]+)``')
_NAMES = re.compile(r'(?:\[(\w+)\]\s+)?(\w+)(\s*=.*)?')
_BLOCK = re.compile(r'\s*\.\. (code-block|code|parsed-literal)::')


def options():
    """{option name: group} of the package (names are unique)."""
    return {opt.name: group.name
            for group, opts in conf.list_opts() for opt in opts}


def prose(text):
    """``text`` with its literal blocks (``::`` and code blocks) blanked
    to spaces, so that line numbers and offsets stay."""
    lines = text.split('\n')
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith('::') or _BLOCK.match(line):
            indent = len(line) - len(line.lstrip())
            i += 1
            while i < len(lines) and (
                    not lines[i].strip() or
                    len(lines[i]) - len(lines[i].lstrip()) > indent):
                lines[i] = ' ' * len(lines[i])
                i += 1
            continue
        i += 1
    return '\n'.join(lines)


def bare_options(text, known):
    """[(line, literal)] of each inline literal of ``text``'s prose that
    names an option of ``known`` ({name: group})."""
    text = prose(text)
    found = []
    for match in _LITERAL.finditer(text):
        literal = ' '.join(match.group(1).split())
        names = _NAMES.fullmatch(literal)
        if names and names.group(2) in known and \
                names.group(1) in (None, known[names.group(2)]):
            found.append((text.count('\n', 0, match.start()) + 1, literal))
    return found


class TestOptionLinks(testtools.TestCase):

    def test_what_counts_as_naming_an_option(self):
        known = {'reserved_cpus': 'nova_pinning',
                 'cgroup_mode': 'nova_pinning_isolation'}
        text = ('Set ``reserved_cpus`` and ``[nova_pinning_isolation]\n'
                'cgroup_mode = v1``; ``[libvirt] cgroup_mode`` is not ours,\n'
                ':oslo.config:option:`nova_pinning.reserved_cpus` is a link,'
                '\nand a block is a file::\n\n'
                '    reserved_cpus = 0-1\n\nafter: ``cpu_shared_set``.\n')
        self.assertEqual([(1, 'reserved_cpus'),
                          (1, '[nova_pinning_isolation] cgroup_mode = v1')],
                         bare_options(text, known))

    def test_admin_and_install_pages_link_every_option(self):
        known = options()
        self.assertIn('reserved_cpus', known)
        found, pages = [], 0
        for folder in FOLDERS:
            for name in sorted(os.listdir(os.path.join(DOC, folder))):
                if not name.endswith('.rst'):
                    continue
                pages += 1
                with open(os.path.join(DOC, folder, name)) as f:
                    found.extend('%s/%s:%d: ``%s``' % (folder, name, n, lit)
                                 for n, lit in bare_options(f.read(), known))
        self.assertGreater(pages, 10)
        self.assertEqual([], found, 'name an option with '
                         ':oslo.config:option:`group.name`')
