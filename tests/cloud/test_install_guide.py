"""The install pages' commands, as the pages show them, in the real cloud.

doc/source/install/kolla-ansible.rst runs on nph-compute2 (nova-compute
in kolla-ansible's containers: ``cloud.sh up --compute2 kolla``), and
doc/source/install/venv.rst on nph-compute1 (nova-compute from a
virtualenv, in that host's namespaces), each from the package switched
off (``cloud.sh package off``) to a guest bound one-to-one, switched off
and on again. The steps are read from the page at test time
(tests/installguide.py says how they are marked): its commands run in
one shell per stretch between two cloud steps (the names a command
assigns carry over), ``set -e -o pipefail``, so a command that fails
fails the test, with its output; a configuration block must be what the
cloud's file for that service holds after the next cloud step.

What differs from an operator's run, and only that: the values of the
page's own names (its ``nph-vars`` block: the container, the
configuration files, the flavor...), which are the cloud's here
(``VALUES``); steps that cannot run here (images, ``kolla-ansible``,
``systemctl``) are this cloud's own (``tools/cloud.sh``); ``pip`` reads
no index (``PIP_NO_INDEX``: the release is already in nova's
environment, as the cloud installed it; a page whose install would
change it fails), so the page's ``nova-pinning-hooks==RELEASE`` names
the version this checkout built (a dev version after the release:
RELEASES, tools/releases.py; tests/unit/test_install_pages.py checks
that every page pins the release).
"""

import glob
import os
import shlex
import shutil
import subprocess
import tempfile

from tests import installguide
from tests import releases
from tests.cloud import base

PAGES = os.path.join(base.TOP, 'doc', 'source', 'install')
CACHE = '/var/cache/nova-pinning-hooks/cloud'
GUEST = 'pinning-check'  # the pages' server name
SEGMENT_TIMEOUT = 900


def _series():
    return base._state('series')


def _etc(*names):
    return os.path.join(base.STATE, 'etc', 'nova', *names)


def kolla_values(ids):
    """The kolla page's names, for nph-compute2 in kolla's containers."""
    return {
        'NOVA_COMPUTE': 'podman exec %snova_compute' % base.KOLLA_PREFIX,
        'NOVA_CONF': ' '.join('--config-file ' + base.KOLLA_CONFIG + f
                              for f in base.KOLLA_CONFIG_FILES),
        # kolla-compute.sh's state directory, nova_compute's
        # /var/lib/nova-pinning-hooks; nova/ is the user nova-compute
        # runs as here: root (tools/cloud/kolla.sh).
        'STATE_DIR': os.path.join(base.STATE, 'compute2', 'state'),
        'NOVA_UID': '0',
        'COMPUTE_HOST': 'nph-compute2',
        'FLAVOR': ids['flavors']['nph.1'],
        'IMAGE': ids['image'],
    }


def venv_values(ids):
    """The virtualenv page's names, for nph-compute1 (the files
    tools/cloud/computes.sh starts its nova-compute with)."""
    return {
        'VENV': os.path.join(CACHE, 'venv-%s' % _series()),
        'UPPER_CONSTRAINTS': os.path.join(
            base.TOP, 'tools', 'constraints', 'nova-%s.txt' % _series()),
        'NOVA_CONF': ' '.join('--config-file ' + _etc(f) for f in (
            'nova.conf', 'cpu-mode.conf', 'compute1.conf', 'pinning1.conf')),
        'NOVA_USER': 'root',  # nova-compute runs as root in this cloud
        'COMPUTE_HOST': 'nph-compute1',
        'FLAVOR': ids['flavors']['nph.1'],
        'IMAGE': ids['image'],
    }


VALUES = {'kolla-ansible.rst': kolla_values, 'venv.rst': venv_values}
# Where each page's commands run: nph-compute2's through podman from the
# host, nph-compute1's in that host's namespaces (its /run, its state
# directory at /var/lib/nova-pinning-hooks, its hostname).
HOST = {'kolla-ansible.rst': 'nph-compute2', 'venv.rst': 'nph-compute1'}
CONF_FILES = {'conf-compute': {'nph-compute1': 'pinning1.conf',
                               'nph-compute2': 'pinning2.conf'},
              'conf-scheduler': 'scheduler.conf'}


def built_version():
    """The version of the wheel tools/cloud/venv.sh built from this
    checkout and installed in the cloud."""
    whl, = glob.glob(os.path.join(CACHE, 'wheels',
                                  'nova_pinning_hooks-*.whl'))
    return os.path.basename(whl).split('-')[1]


def as_built(command):
    """``command`` with the pages' pin of the release replaced by the
    version this checkout built (the same on the release's commit)."""
    return command.replace('nova-pinning-hooks==%s' % releases.lib.last(),
                           'nova-pinning-hooks==%s' % built_version())


def script(values, commands, state_in, state_out, assigned):
    """One stretch of a page's commands as a bash script: the cloud's
    values, the names earlier stretches assigned, then each command as
    the page has it, echoed first."""
    lines = ['set -e -o pipefail']
    lines += ['%s=%s' % (k, shlex.quote(v)) for k, v in values.items()]
    if os.path.exists(state_in):
        lines.append('. %s' % shlex.quote(state_in))
    for command in commands:
        lines.append('printf "%%s\\n" %s' % shlex.quote('# ' + command))
        lines.append(as_built(command))
    if assigned:
        lines.append('declare -p %s > %s' % (' '.join(sorted(assigned)),
                                             shlex.quote(state_out)))
    return '\n'.join(lines) + '\n'


class TestInstallGuide(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(self.delete_guest)
        self.delete_guest()
        self.tmp = tempfile.mkdtemp(prefix='nph-install-guide-')
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # ``openstack`` on PATH: the cloud's client (its virtualenv).
        bindir = os.path.join(self.tmp, 'bin')
        os.mkdir(bindir)
        os.symlink(os.path.join(CACHE, 'venv-%s' % _series(), 'bin',
                                'openstack'),
                   os.path.join(bindir, 'openstack'))
        self.env = dict(os.environ, PATH=bindir + ':' + os.environ['PATH'],
                        OS_CLOUD='nph-admin', PIP_NO_INDEX='1')

    def delete_guest(self):
        for s in self.admin.compute.servers(all_projects=True, name=GUEST):
            self.admin.compute.delete_server(s.id, force=True)
            self.admin.compute.wait_for_delete(s, wait=base.TIMEOUT)

    def argv(self, host, text):
        if host == 'nph-compute1':
            with open('/run/nph-cloud/libvirtd1.pid') as f:
                pid = f.read().split()[0]
            return ['nsenter', '-t', pid, '-m', '-u', '-C', '--',
                    'bash', '-c', text]
        return ['bash', '-c', text]

    def run_page(self, page):
        host = HOST[page]
        steps = installguide.steps(os.path.join(PAGES, page))
        self.assertEqual('vars', steps[0].kind, page)
        values = VALUES[page](self.ids)
        # The page's names and this test's are the same names.
        self.assertEqual(installguide.variables(steps[0]), list(values))
        self.assertEqual(1, sum(s.kind == 'vars' for s in steps), page)
        state = os.path.join(self.tmp, 'names')
        assigned = set()
        pending = []  # (kind, lines, where): checked at the next cloud step
        commands = []
        ran = 0

        def flush():
            nonlocal commands, ran
            if not commands:
                return
            proc = subprocess.run(
                self.argv(host, script(values, commands, state, state,
                                       assigned)),
                capture_output=True, text=True, env=self.env,
                timeout=SEGMENT_TIMEOUT, check=False)
            self.assertEqual(0, proc.returncode, '%s on %s: a command '
                             'failed (exit %d):\n%s\n%s' % (
                                 page, host, proc.returncode,
                                 proc.stdout[-3000:], proc.stderr[-2000:]))
            ran += len(commands)
            commands = []

        # The package as the page's reader starts: switched off.
        base.cloud('package', 'off')
        self.addCleanup(base.cloud, 'package', 'on')
        for step in steps[1:]:
            if step.kind == 'run':
                commands.extend(step.lines)
                for command in step.lines:
                    assigned.update(installguide.variables(
                        installguide.Step('vars', [command], 0)))
            elif step.kind.startswith('conf-'):
                pending.append(step)
            elif step.kind == 'cloud':
                flush()
                base.cloud(*step.lines)
                for conf in pending:
                    self.assert_conf(host, conf)
                pending = []
        flush()
        self.assertEqual([], pending, '%s: configuration never applied'
                         % page)
        return ran

    def assert_conf(self, host, step):
        name = CONF_FILES[step.kind]
        if isinstance(name, dict):
            name = name[host]
        with open(_etc(name)) as f:
            cloud = installguide.ini(f.read().splitlines())
        for section, options in installguide.ini(step.lines).items():
            for option, values in options.items():
                self.assertEqual(values, cloud.get(section, {}).get(option),
                                 'line %d: [%s] %s differs from the '
                                 'cloud\'s %s' % (step.where, section,
                                                  option, name))

    def test_kolla_page_on_nph_compute2(self):
        if base._state('compute2-layout') != 'kolla':
            self.skipTest('nph-compute2 is not in kolla\'s containers '
                          '(cloud.sh up --compute2 kolla)')
        self.assertGreater(self.run_page('kolla-ansible.rst'), 10)

    def test_venv_page_on_nph_compute1(self):
        self.assertGreater(self.run_page('venv.rst'), 10)
