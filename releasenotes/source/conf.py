"""Sphinx configuration of the release notes."""
extensions = ['reno.sphinxext']
project = 'nova-pinning-hooks release notes'
master_doc = 'index'
html_theme = 'alabaster'
