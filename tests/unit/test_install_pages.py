"""The install pages' marked steps (tests/installguide.py) hold together,
without a cloud: tests/cloud/test_install_guide.py runs them in the real
one, and these catch, at every unit run, what would only fail there.

* the page's names (its ``nph-vars`` block) are the ones the cloud test
  gives values to, no more, no fewer;
* every ``$NAME`` a command uses is one of them, or assigned by an
  earlier command of the page;
* every configuration block is followed by a cloud step that applies
  it, and every cloud step is one ``tools/cloud.sh`` has.
"""

import os
import re

import testtools

from tests import installguide
from tests import releases
from tests.cloud import test_install_guide as cloud_test

PAGES = os.path.join(os.path.dirname(__file__), '..', '..', 'doc',
                     'source', 'install')
CLOUD_STEPS = {('package', 'on'), ('package', 'off'),
               ('package', 'disabled'), ('weigher', 'on'),
               ('weigher', 'off')}
_PIN = re.compile(r'nova-pinning-hooks(?:\[\w+\])?==(\d[^\s\'"`,)]*)')
_USE = re.compile(r'\$\{?([A-Za-z_][A-Za-z0-9_]*)')


class TestInstallPages(testtools.TestCase):

    def check(self, page):
        steps = installguide.steps(os.path.join(PAGES, page))
        self.assertEqual('vars', steps[0].kind, page)
        names = installguide.variables(steps[0])
        ids = {'flavors': {'nph.1': 'f'}, 'image': 'i'}
        self.assertEqual(list(cloud_test.VALUES[page](ids)), names, page)
        known = set(names)
        runs = 0
        for i, step in enumerate(steps[1:], 1):
            self.assertNotEqual('vars', step.kind, page)
            if step.kind == 'run':
                for command in step.lines:
                    runs += 1
                    used = set(_USE.findall(command)) - known
                    self.assertEqual(set(), used, '%s line %d: %s' % (
                        page, step.where, command))
                    known.update(installguide.variables(
                        installguide.Step('vars', [command], 0)))
            elif step.kind == 'cloud':
                self.assertIn(tuple(step.lines), CLOUD_STEPS,
                              '%s line %d' % (page, step.where))
            else:
                self.assertIn(step.kind, cloud_test.CONF_FILES)
                self.assertTrue(installguide.ini(step.lines), step)
                self.assertIn('cloud', [s.kind for s in steps[i:]],
                              '%s line %d: never applied' % (
                                  page, step.where))
        self.assertGreater(runs, 10, page)

    def test_kolla_page(self):
        self.check('kolla-ansible.rst')

    def test_venv_page(self):
        self.check('venv.rst')

    def test_every_run_page_is_in_the_cloud_test(self):
        marked = {name for name in os.listdir(PAGES)
                  if name.endswith('.rst') and any(
                      s.kind == 'run' for s in installguide.steps(
                          os.path.join(PAGES, name)))}
        self.assertEqual(set(cloud_test.VALUES), marked)
        self.assertEqual(set(cloud_test.HOST), marked)

    def test_every_page_pins_the_release_the_build_makes(self):
        """The pages pin RELEASES' last release: a build of its commit
        makes that version (tests/unit/test_installed.py), a later
        commit's build its dev successor (the cloud's page test installs
        that one in the pin's place)."""
        doc = os.path.join(PAGES, '..')
        pins = {}
        for folder, _dirs, files in os.walk(doc):
            for name in files:
                if name.endswith('.rst'):
                    with open(os.path.join(folder, name)) as f:
                        for version in _PIN.findall(f.read()):
                            pins.setdefault(version, []).append(name)
        self.assertIn('venv.rst', pins.get(releases.lib.last(), []))
        self.assertEqual({releases.lib.last()}, set(pins), pins)
