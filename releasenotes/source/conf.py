"""Sphinx configuration of the release notes."""
extensions = ['reno.sphinxext']
project = 'nova-pinning-hooks release notes'
master_doc = 'index'
html_theme = 'alabaster'

# reno names versions after git tags, and a tag does not travel with the
# project's commits: in a history without any tag reno calls the current
# version 0.0.0 (its unreleased_version_title applies only to a version
# counted from a tag, "1.0.0-3"). Until the first tag is there, the
# current version is setup.cfg's release (CONTRIBUTING.rst, "Releasing");
# once a tag is found, reno's own answer stands.
import configparser  # noqa: E402
import os  # noqa: E402

from reno import scanner  # noqa: E402

_cfg = configparser.ConfigParser()
_cfg.read(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       '..', '..', 'setup.cfg'))
_RELEASE = _cfg['metadata']['version']
_reno_current_version = scanner.Scanner._get_current_version


def _current_version(self, branch=None):
    version = _reno_current_version(self, branch)
    return _RELEASE if version == '0.0.0' else version


scanner.Scanner._get_current_version = _current_version
