"""The package's version as installed: what ``--version`` of every
command prints and ``nova_pinning_build_info`` exports.

Read from the installed distribution's metadata (pbr wrote it from
setup.cfg's ``version`` when the sdist or wheel was built), so it is the
version pip shows, never a guess from the source tree.
"""

from importlib import metadata

DISTRIBUTION = 'nova-pinning-hooks'


def version_string() -> str:
    """``1.0.0``; ``unknown`` when the package runs uninstalled (from a
    source tree on ``PYTHONPATH``): no metadata says which it is."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return 'unknown'
