#!/usr/bin/env python3
"""Check the release artefacts that `python -m build` wrote (tox -e build).

    python tools/check-dist.py DIST

1. DIST holds one sdist and one pure wheel, both at the version this
   commit builds (RELEASES, tools/releases.py: the release's on its
   commit, a dev version after it);
   ``twine check --strict`` passes on both.
2. The wheel's requirements name libvirt-python only in the ``libvirt``
   extra.
3. For the oldest and the newest nova release (tools/nova-releases;
   constraints: tools/constraints/nova-NN.txt), pip's resolution of
   installing the wheel with the series' constraints (``pip install
   --dry-run --report``, nothing written), with no C compiler on PATH
   (c): every item pip would install is a wheel, or an sdist that then
   builds here, with no compiler, into a pure-Python wheel (nova 29's
   pyinotify, which oslo.log needs, has no wheel on PyPI), or one that
   nova itself installs with those constraints (nova 29's netifaces,
   through oslo.utils: compiled when nova's environment was built, not
   by the wheel):
   (a) in a fresh environment (``--ignore-installed``): what the wheel
       brings is pinned by the constraints (so the same version that
       nova's environment built with those constraints already has:
       installed into kolla's or OpenStack-Ansible's nova venv it adds
       at most these; the few packages upper-constraints leaves unpinned,
       certifi and setuptools, are named), and libvirt-python is not
       among it;
   (b) in Debian's system Python with python3-libvirt (DevStack's way),
       seen through a ``venv --system-site-packages`` of /usr/bin/python3:
       the binding stays Debian's, pip would not install libvirt-python.
Each failure is one line; exit 1 if any, else 0.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
# Loaded by its path: tox runs this with PYTHONSAFEPATH=1, which leaves
# the script's directory off sys.path.


def _tool(name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(TOP, 'tools', name + '.py'))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nova_releases = _tool('nova_releases')
releases = _tool('releases')  # RELEASES: the version this commit builds
SERIES = tuple(r.series for r in nova_releases.ci())
NOVA = {r.series: r.nova for r in nova_releases.ci()}  # as tox.ini's
DEBIAN_PYTHON = '/usr/bin/python3'


def release(dist):
    """The version of DIST's wheel, if it is the one this commit builds."""
    for name in os.listdir(dist):
        match = re.fullmatch(r'nova_pinning_hooks-(%s)-py3-none-any\.whl'
                             % releases.expected(TOP), name)
        if match:
            return match.group(1)
    return releases.expected(TOP)


def canon(name):
    return name.lower().replace('_', '-').replace('.', '-')


def pinned(series):
    """{canonical name: version} of a series' upper-constraints."""
    out = {}
    path = os.path.join(TOP, 'tools', 'constraints', 'nova-%d.txt' % series)
    with open(path) as f:
        for line in f:
            line = line.split('#')[0].split(';')[0].strip()
            if '===' in line:
                name, version = line.split('===')
                out[canon(name)] = version.strip()
    return out


def no_compiler_env():
    """This environment with a PATH that holds no C compiler (only the
    directory of the Python that runs pip) and CC pointing nowhere."""
    env = dict(os.environ, CC='/nonexistent/cc', CXX='/nonexistent/c++')
    env['PATH'] = os.path.dirname(sys.executable)
    for cc in ('cc', 'gcc', 'clang'):
        for d in env['PATH'].split(os.pathsep):
            assert not os.path.exists(os.path.join(d, cc)), (d, cc)
    return env


def dry_run(python, wheel, series, tmp, extra=()):
    """pip's install report (the "install" list) for the wheel with the
    series' constraints, run by ``python``."""
    report = os.path.join(tmp, 'report-%d.json' % series)
    cons = os.path.join(TOP, 'tools', 'constraints', 'nova-%d.txt' % series)
    proc = subprocess.run(
        [python, '-m', 'pip', 'install', '--dry-run', '--quiet',
         '--disable-pip-version-check',
         '--report', report, '-c', cons] + list(extra) + [wheel],
        capture_output=True, text=True, timeout=600, env=no_compiler_env())
    if proc.returncode:
        raise RuntimeError('pip: %s' % (proc.stderr.strip().splitlines()
                                        or ['exit %d' % proc.returncode])[-1])
    with open(report) as f:
        return json.load(f)['install']


def build_without_compiler(python, name, version, tmp):
    """None if ``name==version`` builds from its sdist, with no compiler
    on PATH, into a pure-Python wheel; else why not."""
    out = tempfile.mkdtemp(dir=tmp)
    proc = subprocess.run(
        [python, '-m', 'pip', 'wheel', '--quiet', '--no-deps',
         '--disable-pip-version-check', '--no-binary', name, '-w', out,
         '%s==%s' % (name, version)],
        capture_output=True, text=True, timeout=600, env=no_compiler_env())
    built = os.listdir(out)
    if proc.returncode or len(built) != 1:
        return 'does not build without a compiler: %s' % (
            proc.stderr.strip().splitlines() or ['no wheel'])[-1]
    if not built[0].endswith('-py3-none-any.whl') and \
            not built[0].endswith('-py2.py3-none-any.whl'):
        return 'builds a compiled wheel: %s' % built[0]
    return None


_NOVA_BRINGS = {}


def nova_brings(series, tmp):
    """Canonical names of what nova itself installs with the series'
    constraints (pip's resolution, about 40 s): asked only for an item
    that needs a compiler, which nova's environment then already has."""
    if series not in _NOVA_BRINGS:
        items = dry_run(sys.executable, 'nova==%s' % NOVA[series], series,
                        tmp, ['--ignore-installed'])
        _NOVA_BRINGS[series] = {canon(i['metadata']['name']) for i in items}
    return _NOVA_BRINGS[series]


def check_install(items, series, label, cons, ours, python, tmp):
    errors = []
    names = []
    for item in items:
        meta = item['metadata']
        name = canon(meta['name'])
        names.append(name)
        url = item['download_info']['url']
        if name == 'libvirt-python':
            errors.append('%s, nova %d: pip would install libvirt-python %s'
                          % (label, series, meta['version']))
        elif not url.endswith('.whl'):
            why = build_without_compiler(python, name, meta['version'], tmp)
            if why and name in nova_brings(series, tmp):
                print('%s, nova %d: %s %s %s, but nova itself needs it: '
                      "nova's environment has it before the wheel comes"
                      % (label, series, name, meta['version'], why))
            elif why:
                errors.append('%s, nova %d: %s %s %s' % (
                    label, series, name, meta['version'], why))
            else:
                print('%s, nova %d: %s %s: an sdist, built here without a '
                      'compiler into a pure-Python wheel' % (
                          label, series, name, meta['version']))
        if name != ours and cons.get(name) != meta['version']:
            print('%s, nova %d: %s %s is not pinned by the constraints'
                  % (label, series, name, meta['version']))
    print('%s, nova %d: would install %d: %s' % (
        label, series, len(names), ' '.join(sorted(names))))
    return errors


def main(dist):
    errors = []
    version = release(dist)
    files = sorted(os.listdir(dist))
    expected = ['nova_pinning_hooks-%s-py3-none-any.whl' % version,
                'nova_pinning_hooks-%s.tar.gz' % version]
    if files != expected:
        print('check-dist: %s holds %s, not %s' % (dist, files, expected))
        return 1
    wheel, sdist = (os.path.join(dist, f) for f in expected)
    proc = subprocess.run([sys.executable, '-m', 'twine', 'check',
                           '--strict', wheel, sdist],
                          capture_output=True, text=True)
    if proc.returncode:
        errors.append('twine check: %s' % proc.stdout.strip())
    with zipfile.ZipFile(wheel) as z:
        meta = z.read('nova_pinning_hooks-%s.dist-info/METADATA'
                      % version).decode()
    libvirt = [ln for ln in meta.splitlines()
               if ln.startswith('Requires-Dist: libvirt-python')]
    if libvirt != ['Requires-Dist: libvirt-python>=6.0.0; extra == "libvirt"']:
        errors.append('the wheel requires libvirt-python outside the '
                      'libvirt extra: %s' % libvirt)
    ours = 'nova-pinning-hooks'
    with tempfile.TemporaryDirectory() as tmp:
        debian = os.path.join(tmp, 'debian')
        subprocess.run([DEBIAN_PYTHON, '-m', 'venv', '--system-site-packages',
                        debian], check=True)
        vpy = os.path.join(debian, 'bin', 'python')
        where = subprocess.run(
            [vpy, '-c', 'import libvirt; print(libvirt.__file__)'],
            capture_output=True, text=True)
        if not where.stdout.startswith('/usr/lib/python3/dist-packages/'):
            errors.append("Debian's python3-libvirt is not what Debian's "
                          'Python imports: %s' % (where.stdout.strip()
                                                  or where.stderr.strip()))
        for series in SERIES:
            cons = pinned(series)
            for label, python, extra in (
                    ('(a) fresh venv', sys.executable, ['--ignore-installed']),
                    ("(b) Debian's Python + python3-libvirt", vpy, [])):
                try:
                    items = dry_run(python, wheel, series, tmp, extra)
                except RuntimeError as exc:
                    errors.append('%s, nova %d: %s' % (label, series, exc))
                    continue
                errors += check_install(items, series, label, cons, ours,
                                         python, tmp)
    for e in errors:
        print('check-dist: %s' % e)
    if not errors:
        print('check-dist: %s and %s: OK (no compiler on PATH, nothing '
              'compiled, no libvirt-python)' % tuple(expected))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
