"""Sphinx extension: reno's release notes, grouped by release, and said
not built in a shallow clone.

reno groups the notes by git tags, and a tag does not travel with the
project's commits: RELEASES says which commit is which release, and
tools/releases.py makes the missing tags from it before reno scans
(as setup.py does before pbr). Notes after the last release are under
reno's name for the commit ("1.1.0-3"), as a build of it is a dev
version.

reno reads the notes' history from git: in a shallow clone it fails (a
parent commit it cannot find; and two notes of this history share a UID,
which it accepts only from separate commits). There the
``release-notes`` directive says so on the page and in the build's log,
as tools/run-tests.sh says it of ``tox -e releasenotes``, instead of
failing the whole documentation.

Used by both builds that hold the release notes: doc/source (the
reference's release notes page) and releasenotes/source.
"""

import importlib.util
import os
import subprocess

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.util import logging

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
LOG = logging.getLogger(__name__)


def _tag_releases():
    """tools/releases.py's ``tag``: the tags reno groups the notes by."""
    spec = importlib.util.spec_from_file_location(
        '_nph_releases', os.path.join(TOP, 'tools', 'releases.py'))
    releases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(releases)
    for version in releases.tag(TOP):
        LOG.info('release notes: tagged %s from RELEASES', version)


def _shallow():
    try:
        out = subprocess.run(['git', '-C', TOP, 'rev-parse',
                              '--is-shallow-repository'],
                             capture_output=True, text=True, timeout=30,
                             check=False).stdout
    except OSError:
        return False
    return out.strip() == 'true'


class NotBuilt(Directive):
    """``release-notes`` in a shallow clone: a note instead."""

    has_content = True
    option_spec = {'relnotessubdir': str, 'notesdir': str,
                   'reporoot': str, 'branch': str, 'version': str,
                   'collapse-pre-releases': str, 'earliest-version': str,
                   'ignore-notes': str, 'unreleased-version-title': str}

    def run(self):
        LOG.info('release notes NOT BUILT: a shallow clone has no history '
                 'for reno')
        note = nodes.admonition()
        note += nodes.title(text='Release notes not built')
        note += nodes.paragraph(text=(
            'This documentation was built from a shallow git clone, which '
            'lacks the history reno reads the release notes from. They '
            'are in releasenotes/notes.d.'))
        return [note]


def setup(app):
    if _shallow():
        app.add_directive('release-notes', NotBuilt)
        return {'parallel_read_safe': True}
    _tag_releases()
    app.setup_extension('reno.sphinxext')
    return {'parallel_read_safe': True}
