"""The steps of doc/source/reference/deployments.rst that can run on this
(Debian 12) host.

* pip into Debian's system Python is refused (PEP 668,
  ``EXTERNALLY-MANAGED``);
* a venv with ``--system-site-packages`` takes the package from the
  checkout with no index at all (every dependency from Debian's
  packages), and Debian's own nova (``python3-nova``) finds the plugin's
  entry points there;
* kolla's nova-compute.conf snippet, as the guide prints it, is read by
  that venv's ``nova-pinning`` inside another PID namespace (kolla's
  nova_compute) against the host's libvirtd;
* the systemd units, pointed at that venv, pass ``systemd-analyze verify``.

kolla-ansible's containers themselves run, with podman, in
test_kolla_layout.py.
"""

import atexit
import json
import os
import re
import shutil
import subprocess
import tempfile

import testtools

from tests.functional import base

SYSTEM_PYTHON = '/usr/bin/python3'
DOC = os.path.join(base.TOP, 'doc', 'source', 'reference',
                   'deployments.rst')


def _debian_missing():
    if not os.path.exists('/usr/lib/python3/dist-packages/nova/__init__.py'):
        return "Debian's python3-nova is not installed (tools/setup-host.sh)"
    if subprocess.run([SYSTEM_PYTHON, '-m', 'pip', '--version'],
                      capture_output=True).returncode:
        return "Debian's python3-pip is not installed"
    return None


def doc_block(name):
    """The literal block that follows ``.. <name>`` in
    reference/deployments.rst."""
    with open(DOC) as f:
        text = f.read()
    match = re.search(r'\n\.\. %s\n\n::\n\n((?:    [^\n]*\n|\n)+)'
                      % re.escape(name), text)
    if match is None:
        raise AssertionError('no block %r in %s' % (name, DOC))
    lines = match.group(1).rstrip('\n').split('\n')
    return '\n'.join(line[4:] for line in lines) + '\n'


class DebianVenv:
    """One venv for the module: ``python3 -m venv --system-site-packages``
    with the checkout installed, as the guide says."""

    path = None

    @classmethod
    def get(cls, test):
        if cls.path is None:
            path = tempfile.mkdtemp(prefix='nph-debian-venv.')
            atexit.register(shutil.rmtree, path, True)
            subprocess.run([SYSTEM_PYTHON, '-m', 'venv',
                            '--system-site-packages', path], check=True,
                           timeout=300)
            # --no-index: nothing from PyPI; every dependency must already
            # be one of Debian's packages. --no-build-isolation: pbr and
            # setuptools are Debian's too.
            proc = subprocess.run(
                [path + '/bin/pip', 'install', '--no-index',
                 '--no-build-isolation', base.TOP],
                capture_output=True, text=True, timeout=300)
            test.assertEqual(0, proc.returncode, proc.stdout + proc.stderr)
            cls.path = path
        return cls.path


class TestDebianPackages(testtools.TestCase):

    def setUp(self):
        super().setUp()
        base.require(self, _debian_missing())

    def test_pip_into_the_system_python_is_refused(self):
        self.assertTrue(os.path.exists(
            '/usr/lib/python3.11/EXTERNALLY-MANAGED'))
        proc = subprocess.run(
            [SYSTEM_PYTHON, '-m', 'pip', 'install', '--no-deps', base.TOP],
            capture_output=True, text=True, timeout=120)
        self.assertNotEqual(0, proc.returncode)
        self.assertIn('externally-managed-environment', proc.stderr)
        # Nothing was installed.
        proc = subprocess.run([SYSTEM_PYTHON, '-c',
                               'import nova_pinning_hooks'],
                              capture_output=True, cwd='/')
        self.assertNotEqual(0, proc.returncode)

    def test_venv_with_system_site_packages_loads_into_debians_nova(self):
        venv = DebianVenv.get(self)
        script = (
            'import importlib.metadata as md, json, nova, nova.version\n'
            'eps = md.entry_points()\n'
            'hooks = {e.name: e.load().__name__\n'
            '         for e in eps.select(group="nova.hooks")}\n'
            'drivers = {e.name: e.load().__name__ for e in eps.select(\n'
            '    group="oslo.messaging.notify.drivers")\n'
            '    if e.name == "nova_pinning"}\n'
            'import nova_pinning_hooks, libvirt\n'
            'print(json.dumps([nova.__file__,\n'
            '                  nova.version.version_string(), hooks,\n'
            '                  drivers, nova_pinning_hooks.__file__,\n'
            '                  libvirt.__file__]))\n')
        proc = subprocess.run([venv + '/bin/python', '-c', script],
                              capture_output=True, text=True, timeout=120,
                              cwd='/')
        self.assertEqual(0, proc.returncode, proc.stderr)
        nova_file, version, hooks, drivers, ours, libvirt_file = \
            json.loads(proc.stdout)
        # Debian's nova and libvirt bindings, the package from the venv.
        self.assertTrue(nova_file.startswith('/usr/lib/python3/'))
        self.assertTrue(libvirt_file.startswith('/usr/lib/python3/'))
        self.assertTrue(ours.startswith(venv + '/'), ours)
        self.assertEqual({'bind_numa_affinity': 'BindNumaAffinityHook',
                          'nova_pinning_allocation_ratio':
                          'AllocationRatioHook',
                          'nova_pinning_node_summary': 'NodeSummaryHook'},
                         hooks)
        self.assertEqual({'nova_pinning': 'ActivationDriver'}, drivers)
        self.assertTrue(version.split('.')[0].isdigit(), version)

    def test_systemd_units_pointed_at_the_venv_verify(self):
        venv = DebianVenv.get(self)
        tmp = self.useFixture(__import__('fixtures').TempDir()).path
        for unit, command in (('nova-pinning-agent.service',
                               'nova-pinning'),
                              ('nova-pinning-isolate.service',
                               'nova-pinning-isolate')):
            with open(os.path.join(base.TOP, 'etc', 'systemd', unit)) as f:
                text = f.read()
            self.assertIn('/usr/local/bin/%s ' % command, text)
            path = os.path.join(tmp, unit)
            with open(path, 'w') as f:
                f.write(text.replace('/usr/local/bin/%s ' % command,
                                     '%s/bin/%s ' % (venv, command)))
            proc = subprocess.run(['systemd-analyze', 'verify', path],
                                  capture_output=True, text=True,
                                  timeout=60)
            self.assertEqual(0, proc.returncode, proc.stderr)
            self.assertNotIn(unit, proc.stderr)


class TestKollaSnippet(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        base.require(self, _debian_missing())

    def test_snippet_read_inside_another_pid_namespace(self):
        venv = DebianVenv.get(self)
        snippet = doc_block('kolla nova-compute.conf')
        self.assertIn('driver = nova_pinning', snippet)
        path = os.path.join(self.tmp, 'nova-compute.conf')
        with open(path, 'w') as f:
            f.write(snippet)
        # Stands in for the overcommit file nova-compute writes at start
        # (no nova-compute runs here).
        ratio = os.path.join(self.tmp, 'ratio.conf')
        with open(ratio, 'w') as f:
            f.write('[nova_pinning]\nallocation_ratio = 4.0\n')
        a = self.boot('deploy')
        proc = subprocess.run(
            [shutil.which('unshare'), '--pid', '--fork', '--mount-proc',
             venv + '/bin/nova-pinning', '--config-file', path,
             '--config-file', ratio, 'status',
             '--format', 'json'], capture_output=True, text=True,
            timeout=120, cwd='/')
        self.assertEqual(0, proc.returncode, proc.stderr)
        status = json.loads(proc.stdout)
        guest = {g['name']: g for g in status['guests']}[a.name()]
        # From nova_compute's PID namespace: the qemu is not visible, so
        # its facts are unknown, and said so.
        self.assertEqual('unknown', guest['kernel_facts'])
        self.assertIn(a.name(), status['kernel_facts_unknown'])
