"""Sphinx configuration of the documentation."""
project = 'nova-pinning-hooks'
master_doc = 'index'
html_theme = 'alabaster'
exclude_patterns = []
