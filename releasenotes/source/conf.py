"""Sphinx configuration of the release notes."""
import os
import sys

# doc/ext: reno_release, which also brings reno.sphinxext.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'doc', 'ext'))

extensions = ['reno_release']
project = 'nova-pinning-hooks release notes'
master_doc = 'index'
html_theme = 'alabaster'
