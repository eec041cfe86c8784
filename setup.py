import configparser
import os

import setuptools

# pbr derives the version from git tags, and a tag does not travel with
# the project's commits: the version an operator sees is setup.cfg's
# [metadata] version, given to pbr as PBR_VERSION (read before git).
# A packager's own PBR_VERSION still wins. CONTRIBUTING.rst, "Releasing".
_cfg = configparser.ConfigParser()
_cfg.read(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'setup.cfg'))
os.environ.setdefault('PBR_VERSION', _cfg['metadata']['version'])

setuptools.setup(setup_requires=['pbr>=2.0.0'], pbr=True)
