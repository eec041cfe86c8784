"""The supported nova releases for the tests: tools/nova_releases.py,
loaded by its path (tools/ is no package, and tox's PYTHONSAFEPATH keeps
the checkout's folders off sys.path).

Tests ask this module for a capability or a place in the list (the
oldest, the newest, the release kolla's images hold, whether a release
moves the shared set), never for a series number written in the test:
taking a release out of tools/nova-releases or adding one changes what
they ask, not their text.
"""

import importlib.util
import os
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
PATH = os.path.join(TOP, 'tools', 'nova_releases.py')



def tool(path, name):
    """The module of a script of tools/ (no package), loaded once by its
    path as ``name``."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


lib = tool(PATH, 'nph_tools_nova_releases')

releases = lib.releases
release = lib.release
oldest = lib.oldest
newest = lib.newest
before = lib.before
with_flag = lib.with_flag
