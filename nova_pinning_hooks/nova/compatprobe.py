"""What this Python's nova offers the package, asked in a child process.

``nova-pinning-status upgrade check`` runs ``python -m
nova_pinning_hooks.nova.compatprobe`` with its own Python (nova-compute's
when it is installed in nova's environment, as it must be) and reads
one line of JSON from it::

    {"nova": "34.0.0", "lacking": [], "tested": true,
     "tested_releases": [29, 34]}
    {"nova": null, "lacking": [], "error": "nova is not installed ..."}

* ``nova``: the installed nova distribution's version (None: none);
* ``lacking``: ``compat.lacking`` of nova's libvirt driver as imported
  here: what nova-compute's activation would refuse to start without;
* ``tested``: the release is one of ``compat.TESTED``,
  ``tested_releases`` (the first and the last; the release matrix of
  doc/source/reference/nova-integration.rst);
* ``error``: why nova's libvirt driver could not be imported.

Invariants:

* a process of its own: importing nova's libvirt driver takes seconds,
  pulls in eventlet on the older series and registers nova's options;
  none of that reaches the command, which bounds the child in time and
  kills it when it overruns;
* nothing is written, no libvirt connection is opened (nova's driver
  opens one only when instantiated; it is not);
* the last line of standard output is the JSON; anything nova prints
  goes to standard error.
"""

import json
import sys
import typing
from importlib import metadata

from nova_pinning_hooks.nova import compat
from nova_pinning_hooks.nova import migration


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return '%s: %s' % (type(exc).__name__, text.splitlines()[0]) if text \
        else type(exc).__name__


def probe() -> dict[str, typing.Any]:
    """The answer (see the module's doc). Imports nova."""
    releases = list(compat.TESTED)
    try:
        version = metadata.version('nova')
    except metadata.PackageNotFoundError:
        return {'nova': None, 'lacking': [], 'tested': False,
                'tested_releases': releases,
                'error': 'nova is not installed in this Python (%s)'
                         % sys.executable}
    tested = compat.tested(version)
    try:
        driver_cls = migration._driver_class()
        module = migration._module()
    except Exception as exc:  # ImportError, or nova failing to import
        return {'nova': version, 'tested': tested,
                'tested_releases': releases,
                'lacking': compat.lacking(None, None),
                'error': _first_line(exc)}
    return {'nova': version, 'tested': tested, 'tested_releases': releases,
            'lacking': compat.lacking(driver_cls, module)}


def main() -> int:
    # nova's imports may print: the answer is the last line of stdout.
    real = sys.stdout
    sys.stdout = sys.stderr
    try:
        answer = probe()
    finally:
        sys.stdout = real
    real.write(json.dumps(answer, sort_keys=True) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
