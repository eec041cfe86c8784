"""The package's releases for the tests: tools/releases.py, loaded by
its path (tools/ is no package), and what a build of the checkout must
call itself."""

import os

from tests import nova_releases

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
PATH = os.path.join(TOP, 'tools', 'releases.py')
lib = nova_releases.tool(PATH, 'nph_tools_releases')


def expected_version(top=TOP):
    """A regular expression of the version a build of ``top``'s HEAD
    makes (tools/releases.py's ``expected``)."""
    return lib.expected(top)
