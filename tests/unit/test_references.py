"""The generated references in doc/source against the code.

The options reference (doc/source/configuration/options.rst) is
oslo.config's ``show-options`` over the namespaces it names, and the
sample page sphinxconfiggen's run of config-generator.conf; the command
reference (doc/source/cli/) is sphinx-argparse over each command's
``argument_parser``. Generated, they cannot leave out what their source
has; what can go wrong is the source: a command without its page, a page
that renders another parser than the command parses with, an option the
package reads that the named namespaces do not list. Each test here
fails on one of those.
"""

import configparser
import contextlib
import importlib
import io
import os
import re

import testtools
from oslo_config import cfg
from oslo_config import generator

from nova_pinning_hooks import conf as conf_mod

TOP = os.path.join(os.path.dirname(__file__), '..', '..')
DOC = os.path.join(TOP, 'doc', 'source')


def _read(*path):
    with open(os.path.join(*path), encoding='utf-8') as f:
        return f.read()


def console_scripts():
    """{command: 'module:function'} of setup.cfg."""
    setup = configparser.ConfigParser()
    setup.read(os.path.join(TOP, 'setup.cfg'))
    scripts = {}
    for line in setup['entry_points']['console_scripts'].splitlines():
        if line.strip():
            name, _, target = line.partition('=')
            scripts[name.strip()] = target.strip()
    return scripts


def directive_options(text, directive):
    """[{option: value}] of each ``.. directive::`` in an rst text."""
    found = []
    for match in re.finditer(r'^\.\. %s::(.*)\n((?:[ \t]+\S.*\n|\n)*)'
                             % re.escape(directive), text, re.M):
        options = {'': match.group(1).strip()}
        for name, value in re.findall(r'^\s+:([\w-]+):(.*)$',
                                      match.group(2), re.M):
            options[name] = value.strip()
        found.append(options)
    return found


def subcommand_paths(parser, prefix=()):
    """Every sub-command path of an argparse parser: ('upgrade',),
    ('upgrade', 'check')... (a positional is one word: its choices, or
    its name, as oslo.upgradecheck's ``check``, which ``nova-pinning-status``
    takes alone)."""
    import argparse

    paths = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths.append(prefix + (name,))
                paths.extend(subcommand_paths(sub, prefix + (name,)))
        elif not action.option_strings:
            paths.extend(prefix + (c,) for c in action.choices or
                         [action.dest])
    return paths


def subparser(parser, path):
    import argparse

    for name in path:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) and \
                    name in action.choices:
                parser = action.choices[name]
                break
        else:
            return parser  # a positional's choice: its parser's help
    return parser


def main_help(main, argv):
    """What the command itself prints for ``argv --help`` (exit 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv + ['--help'])
        except SystemExit as exc:
            assert exc.code in (0, None), (argv, exc.code)
    return out.getvalue()


class TestCommandReference(testtools.TestCase):

    def test_every_command_has_its_generated_page(self):
        scripts = console_scripts()
        self.assertEqual({'nova-pinning', 'nova-pinning-isolate',
                          'nova-pinning-status'}, set(scripts))
        pages = {}
        for name in os.listdir(os.path.join(DOC, 'cli')):
            if name.endswith('.rst'):
                for opts in directive_options(_read(DOC, 'cli', name),
                                              'argparse'):
                    pages[opts.get('prog')] = (name, opts)
        self.assertEqual(set(scripts), set(pages))
        index = _read(DOC, 'cli', 'index.rst')
        for prog, target in scripts.items():
            name, opts = pages[prog]
            module = target.partition(':')[0]
            self.assertEqual(prog + '.rst', name)
            self.assertEqual(module, opts.get('module'), prog)
            self.assertEqual('argument_parser', opts.get('func'), prog)
            self.assertNotIn('nosubcommands', opts, prog)
            self.assertIn('\n   %s\n' % prog, index)  # in its toctree

    def test_the_page_renders_the_parser_main_parses_with(self):
        # The parser the page is generated from prints, for the command
        # and every sub-command, exactly the help that the command
        # itself prints: the same options, the same sub-commands.
        for prog, target in console_scripts().items():
            module_name, _, func = target.partition(':')
            module = importlib.import_module(module_name)
            main = getattr(module, func)
            parser = module.argument_parser()
            self.assertEqual(prog, parser.prog)
            paths = subcommand_paths(parser)
            self.assertTrue(paths, prog)
            for path in [()] + paths:
                self.assertEqual(
                    main_help(main, list(path)),
                    subparser(parser, path).format_help(),
                    '%s %s' % (prog, ' '.join(path)))

    def test_every_sub_command_main_runs_is_in_the_parser(self):
        from nova_pinning_hooks.cmd import isolate
        from nova_pinning_hooks.cmd import pinning
        from nova_pinning_hooks.cmd import status

        def names(module):
            return {p[0] for p in subcommand_paths(module.argument_parser())}

        self.assertEqual(set(isolate.COMMANDS), names(isolate))
        self.assertEqual({'plan'} | {n for n, _, _ in pinning._LIVE_COMMANDS},
                         names(pinning))
        self.assertIn(('upgrade', 'check'),
                      subcommand_paths(status.argument_parser()))


class TestOptionsReference(testtools.TestCase):

    def registered(self):
        """{(group, option)} of what the package reads: every option
        ``register_opts`` registers (nova-compute and the commands call
        it), oslo.log's aside."""
        def options(conf):
            found = set()
            for group in list(conf):
                value = conf[group]
                if isinstance(value, cfg.ConfigOpts.GroupAttr):
                    found.update((group, name) for name in value)
                else:
                    found.add(('DEFAULT', group))
            return found

        conf = cfg.ConfigOpts()
        conf_mod.register_opts(conf)
        # Less oslo.config's own (config_source, shell_completion).
        return options(conf) - options(cfg.ConfigOpts())

    def test_every_option_is_in_the_reference(self):
        shown = directive_options(
            _read(DOC, 'configuration', 'options.rst'), 'show-options')
        self.assertEqual(1, len(shown))
        namespaces = shown[0][''].split()
        listed = set()
        # What show-options renders: oslo.config's generator's listing of
        # those namespaces, through their installed entry points.
        for _, groups in generator._list_opts(namespaces):
            for group, opts in groups:
                name = getattr(group, 'name', group) or 'DEFAULT'
                listed.update((name, opt.dest) for opt in opts)
        self.assertEqual(set(), self.registered() - listed)
        self.assertEqual(set(), listed - self.registered())

    def test_the_sample_page_covers_the_namespaces(self):
        with open(os.path.join(TOP, 'etc', 'nova-pinning-hooks',
                               'config-generator.conf')) as f:
            sample_namespaces = set(re.findall(r'^namespace = (\S+)$',
                                               f.read(), re.M))
        shown = directive_options(
            _read(DOC, 'configuration', 'options.rst'), 'show-options')
        self.assertLessEqual(set(shown[0][''].split()), sample_namespaces)
        with open(os.path.join(DOC, 'conf.py')) as f:
            self.assertIn("'config-generator.conf'", f.read())
