"""The package's layers, read from its source (no module is imported).

* ``virt`` is the only module that imports libvirt (its reads and writes,
  ``virtread`` and ``virtwrite``, reach it through ``virt.libvirt``, the
  one place the tests swap it);
* the pure engine (cpuset, topology, guest, policy, assign, emuthreads,
  plan, replan)
  imports nothing that does I/O, nothing of nova's and none of the
  package's adapters: only the standard library's pure modules and each
  other;
* nothing imports eventlet.
"""

import ast
import os

import testtools

PACKAGE = os.path.join(os.path.dirname(__file__), '..', '..',
                       'nova_pinning_hooks')
ENGINE = ('cpuset', 'topology', 'guest', 'policy', 'assign', 'emuthreads',
          'plan', 'replan')
# What the engine may import: pure standard library modules and itself.
PURE_STDLIB = {'dataclasses', 'functools', 'math', 'operator', 'typing',
               'xml.etree.ElementTree', 'string', 'collections',
               'itertools', 'bisect', 'heapq'}


def modules():
    for root, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, PACKAGE)[:-3].replace(os.sep, '.')
                yield rel, path


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


class TestLayers(testtools.TestCase):

    def test_only_virt_imports_libvirt(self):
        importers = sorted(m for m, path in modules()
                           if any(n == 'libvirt' or n.startswith('libvirt.')
                                  for n in imported(path)))
        self.assertEqual(['virt'], importers)

    def test_the_engine_is_pure(self):
        ours = {'nova_pinning_hooks.%s' % m for m in ENGINE}
        for name in ENGINE:
            found = imported(os.path.join(PACKAGE, name + '.py'))
            # "from nova_pinning_hooks import plan" names both the package
            # and the module; the package itself is not a dependency.
            found.discard('nova_pinning_hooks')
            self.assertEqual(set(), found - PURE_STDLIB - ours,
                             '%s imports more than the engine may' % name)

    def test_nothing_imports_eventlet(self):
        for name, path in modules():
            self.assertFalse(
                [n for n in imported(path) if n.split('.')[0] == 'eventlet'],
                name)
