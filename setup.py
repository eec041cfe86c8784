import importlib.util
import os

import setuptools

# pbr derives the version from git tags (X.Y.Z on a release's commit,
# X.Y.Z+1.devN after it), and a tag does not travel with the project's
# commits: RELEASES says which commit is which release, and
# tools/releases.py makes the missing tags from it first. An unpacked
# sdist (no git) keeps the version its metadata records; a packager's
# own PBR_VERSION still wins. CONTRIBUTING.rst, "Releasing".
_top = os.path.dirname(os.path.abspath(__file__))
_tool = os.path.join(_top, 'tools', 'releases.py')
if not os.environ.get('PBR_VERSION') and os.path.exists(_tool):
    _spec = importlib.util.spec_from_file_location('_nph_releases', _tool)
    _releases = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_releases)
    if _releases.in_git(_top):
        _releases.tag(_top)

setuptools.setup(setup_requires=['pbr>=2.0.0'], pbr=True)
