"""The package's layers, read from its source (no module is imported).

Each folder of the package is a layer; ``LAYERS`` lists them from the
bottom up, and a module may import only from its own layer and the
layers below it (``conf.py``, the options, sits just under ``nova`` and
``cmd``; ``nova`` and ``cmd`` are both on top and import neither each
other; ``passes`` and ``isolation`` are siblings above ``host`` in the
same way). The rules, as each layer's ``__init__.py`` states them:

* ``engine`` imports nothing outside ``engine`` but the standard
  library's pure modules (no I/O, no clock, no threads);
* only ``host`` touches libvirt, /proc and /sys (``isolation``, which
  places the host's own processes, reads /proc and writes cgroups under
  /sys of its own; ``conf`` names such paths as option defaults); of
  ``host``, exactly one module imports libvirt (``libvirtapi``, the one
  place the tests swap it);
* nothing imports eventlet;
* no import runs from a lower layer to a higher one, and every module
  lives in a layer.

The unit tests follow the same order: ``tests/unit/<layer>/`` holds the
tests of that layer, and a module there imports from the package only
its own layer, the layers below it and ``conf`` (see
``test_unit_tests_import_no_higher_layer``).
"""

import ast
import os

import testtools

PACKAGE = os.path.join(os.path.dirname(__file__), '..', '..',
                       'nova_pinning_hooks')
# The unit tests, one folder per layer (tests/unit/<layer>/).
UNIT_TESTS = os.path.dirname(os.path.abspath(__file__))
# Bottom up; a module may import its own layer and those before it.
# Layers in one tuple share a rank and do not import each other.
LAYERS = (('engine',), ('host',), ('passes', 'isolation'),
          ('observe',), ('runtime',), ('conf',), ('nova', 'cmd'))
RANK = {layer: rank for rank, names in enumerate(LAYERS)
        for layer in names}
# What the engine may import: pure standard library modules and itself.
PURE_STDLIB = {'dataclasses', 'enum', 'functools', 'math', 'operator',
               'typing',
               'xml.etree.ElementTree', 'xml.parsers', 'xml.parsers.expat',
               'io', 'json', 're', 'string', 'collections', 'itertools',
               'bisect', 'heapq',
               # crc32, a checksum (engine/hostchoice's draw)
               'zlib'}
# Where /proc and /sys may be named.
KERNEL_PATHS = {'host', 'isolation', 'conf'}
# The policy's decision stages (engine/policy/), in order: each imports
# only the stages before it.
POLICY_STAGES = ('options', 'homes', 'layout', 'placement', 'make')


def modules():
    """(module name relative to the package, its layer, path)."""
    for root, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, PACKAGE)[:-3].replace(os.sep, '.')
                yield rel, layer_of(rel), path


def layer_of(rel):
    """The layer of a module named relative to the package (its folder,
    or ``conf``); None for anything else (the package itself too)."""
    first = rel.split('.')[0]
    return first if first in RANK else None


def imported(path):
    """Every module name an ``import`` or ``from ... import`` names,
    with ``from package import module`` as ``package.module``."""
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update('%s.%s' % (node.module, a.name) for a in node.names)
    return names


def ours(names):
    """The package's modules among ``names``, relative to the package
    (``from nova_pinning_hooks import conf`` names both the package and
    ``conf``; the package itself is not a dependency)."""
    prefix = 'nova_pinning_hooks.'
    return {n[len(prefix):] for n in names if n.startswith(prefix)}


def unit_test_modules():
    """(path relative to tests/unit, its layer, path) of every module
    under tests/unit/<layer>/, for each layer that has such a folder."""
    for layer in sorted(RANK):
        top = os.path.join(UNIT_TESTS, layer)
        for root, _, files in os.walk(top):
            for name in sorted(files):
                if name.endswith('.py'):
                    path = os.path.join(root, name)
                    yield os.path.relpath(path, UNIT_TESTS), layer, path


def kernel_paths(path):
    """String constants of the module that name /proc or /sys."""
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    return sorted({node.value for node in ast.walk(tree)
                   if isinstance(node, ast.Constant)
                   and isinstance(node.value, str)
                   and node.value.startswith(('/proc', '/sys'))})


class TestLayers(testtools.TestCase):

    def test_every_module_lives_in_a_layer(self):
        self.assertEqual([], sorted(
            rel for rel, layer, _ in modules()
            if rel != '__init__' and layer not in RANK))

    def test_no_import_runs_upward(self):
        wrong = []
        for rel, layer, path in modules():
            for target in sorted(ours(imported(path))):
                other = layer_of(target)
                if other is None or other == layer:
                    continue
                if RANK[other] >= RANK.get(layer, -1):
                    wrong.append('%s (%s) imports %s (%s)' % (
                        rel, layer, target, other))
        self.assertEqual([], wrong)

    def test_unit_tests_import_no_higher_layer(self):
        """A test module under tests/unit/<layer>/ (helpers there too)
        imports from the package only its own layer, the layers below
        it, and ``conf``: the options, which the tests of every layer
        register on their own ``ConfigOpts``. Helpers outside these
        folders (tests/fixtures.py, tests/unit/scrape.py, the fakes) are
        not checked here; a test of a higher layer's code lives in that
        layer's folder."""
        found = list(unit_test_modules())
        # Not vacuous: every layer but conf has its folder of tests.
        self.assertEqual(set(RANK) - {'conf'},
                         {layer for _, layer, _ in found})
        wrong = []
        for rel, layer, path in found:
            for target in sorted(ours(imported(path))):
                other = layer_of(target)
                if other in (None, layer, 'conf'):
                    continue
                if RANK[other] >= RANK[layer]:
                    wrong.append('%s (%s) imports %s (%s)' % (
                        rel, layer, target, other))
        self.assertEqual([], wrong)

    def test_the_kernels_work_never_imports_the_agent_above_it(self):
        # isolation/kernel/ (pinmap, interrupts, workqueue, irqbalance)
        # is a room below the isolation agent: it imports engine, host
        # and itself; isolation/ imports it, never the other way.
        kernel = [(rel, path) for rel, _, path in modules()
                  if rel.startswith('isolation.kernel.')]
        self.assertGreaterEqual(len(kernel), 4)
        wrong = sorted(
            '%s imports %s' % (rel, target)
            for rel, path in kernel
            for target in ours(imported(path))
            if target.startswith('isolation')
            and not target.startswith('isolation.kernel'))
        self.assertEqual([], wrong)

    def test_the_engine_is_pure(self):
        for rel, layer, path in modules():
            if layer != 'engine':
                continue
            found = {n for n in imported(path)
                     if n != 'nova_pinning_hooks'
                     and not n.startswith('nova_pinning_hooks.engine')}
            self.assertEqual(set(), found - PURE_STDLIB,
                             '%s imports more than the engine may' % rel)

    def test_only_libvirtapi_imports_libvirt(self):
        importers = sorted(rel for rel, _, path in modules()
                           if any(n == 'libvirt' or n.startswith('libvirt.')
                                  for n in imported(path)))
        self.assertEqual(['host.libvirtapi'], importers)

    def test_only_host_and_isolation_name_proc_and_sys(self):
        found = {rel: kernel_paths(path) for rel, layer, path in modules()
                 if layer not in KERNEL_PATHS}
        self.assertEqual({}, {rel: p for rel, p in found.items() if p})

    def test_nothing_imports_eventlet(self):
        for rel, _, path in modules():
            self.assertFalse(
                [n for n in imported(path) if n.split('.')[0] == 'eventlet'],
                rel)

    def test_each_policy_stage_imports_only_the_stages_before_it(self):
        found = {rel.split('.')[-1] for rel, _, _ in modules()
                 if rel.startswith('engine.policy.')}
        self.assertEqual(set(POLICY_STAGES) | {'__init__'}, found)
        for i, stage in enumerate(POLICY_STAGES):
            path = os.path.join(PACKAGE, 'engine', 'policy', stage + '.py')
            stages = {n.split('.')[2] for n in ours(imported(path))
                      if n.startswith('engine.policy.')}
            self.assertEqual(set(), stages - set(POLICY_STAGES[:i]), stage)
