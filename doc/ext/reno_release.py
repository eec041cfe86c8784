"""Sphinx extension: reno's release notes, with the version named as
releasenotes/ names it, and said not built in a shallow clone.

reno names versions after git tags, and a tag does not travel with the
project's commits: in a history without any tag reno calls the current
version 0.0.0 (its unreleased_version_title applies only to a version
counted from a tag, "1.0.0-3"). Until the first tag is there, the
current version is setup.cfg's release (CONTRIBUTING.rst, "Releasing");
once a tag is found, reno's own answer stands.

reno reads the notes' history from git: in a shallow clone it fails (a
parent commit it cannot find; and two notes of this history share a UID,
which it accepts only from separate commits). There the
``release-notes`` directive says so on the page and in the build's log,
as tools/run-tests.sh says it of ``tox -e releasenotes``, instead of
failing the whole documentation.

Used by both builds that hold the release notes: doc/source (the
reference's release notes page) and releasenotes/source.
"""

import configparser
import os
import subprocess

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.util import logging

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
LOG = logging.getLogger(__name__)


def _release():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(TOP, 'setup.cfg'))
    return cfg['metadata']['version']


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
    from reno import scanner

    release = _release()
    reno_current_version = scanner.Scanner._get_current_version
    if not getattr(reno_current_version, 'nph_patched', False):
        def current_version(self, branch=None):
            version = reno_current_version(self, branch)
            return release if version == '0.0.0' else version

        current_version.nph_patched = True
        scanner.Scanner._get_current_version = current_version
    app.setup_extension('reno.sphinxext')
    return {'parallel_read_safe': True}
