"""Sphinx extension: reno's current version is setup.cfg's release until
the history has a tag.

reno names versions after git tags, and a tag does not travel with the
project's commits: in a history without any tag reno calls the current
version 0.0.0 (its unreleased_version_title applies only to a version
counted from a tag, "1.0.0-3"). Until the first tag is there, the
current version is setup.cfg's release (CONTRIBUTING.rst, "Releasing");
once a tag is found, reno's own answer stands.

Used by both builds that hold the release notes: doc/source (the
reference's release notes page) and releasenotes/source.
"""

import configparser
import os

from reno import scanner

SETUP_CFG = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         '..', '..', 'setup.cfg')


def _release():
    cfg = configparser.ConfigParser()
    cfg.read(SETUP_CFG)
    return cfg['metadata']['version']


def setup(app):
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
