"""Sphinx configuration of the documentation.

OpenStack's documentation toolchain (doc/requirements.txt): the
openstackdocstheme theme; oslo.config's extensions, ``show-options``
for the options reference and ``sphinxconfiggen`` for the sample file,
written at each build from etc/nova-pinning-hooks/config-generator.conf
(the file ``tox -e genconfig`` writes etc/'s sample from); reno's
``release-notes`` directive; sphinx-argparse for the command reference,
from each command's own parser (``argument_parser`` in
nova_pinning_hooks/cmd/). Built by ``tox -e docs`` with warnings as
errors.
"""
import importlib.metadata
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# doc/ext: this project's own extensions.
sys.path.insert(0, os.path.join(HERE, '..', 'ext'))

extensions = [
    'openstackdocstheme',
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
    'reno_release',  # reno.sphinxext, versions as releasenotes/ names them
    'sphinxarg.ext',
]

project = 'nova-pinning-hooks'
master_doc = 'index'
html_theme = 'openstackdocs'
exclude_patterns = ['_build']

# openstackdocstheme: no repository name, so no page links to a source
# or bug tracker: the theme would make https://opendev.org/<name>/src/...
# of it, and this project has no repository there (setup.cfg names no
# home page). No bug project is set either, so no bug button. The page
# dates come from git (a shallow clone has them too: its last commit).
# The version is the installed package's, setup.cfg's release: the
# theme's own (pbr's, from git tags) would be 0.0.1.devN in a history
# without a tag.
openstackdocs_repo_name = ''
openstackdocs_pdf_filename = 'doc-nova-pinning-hooks.pdf'  # unused: no link
openstackdocs_auto_name = False
openstackdocs_auto_version = False
openstackdocs_pdf_link = False
version = release = importlib.metadata.version(project)

# oslo_config.sphinxconfiggen: _static/nova-pinning-hooks.conf.sample,
# from the configuration of ``tox -e genconfig`` (our options and
# oslo.log's), generated at each build (not in git).
config_generator_config_file = os.path.join(
    HERE, '..', '..', 'etc', 'nova-pinning-hooks',
    'config-generator.conf')
sample_config_basename = '_static/nova-pinning-hooks'
# Made here: git keeps no empty folder, and in a fresh clone Sphinx
# warns (an error with -W) about a static path that does not exist yet
# when it reads this file, before the generator writes into it.
os.makedirs(os.path.join(HERE, '_static'), exist_ok=True)
html_static_path = ['_static']
