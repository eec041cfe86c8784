"""The tests of nova-pinning-hooks.

Under tox (``NPH_TEST_INSTALLED=1``) they test the package as installed,
from the wheel tox built, not the checkout's ``nova_pinning_hooks/``,
which stands first on ``sys.path`` beside ``tests/`` (the test runner
puts the checkout there to find the tests). The package is imported here
once, with the checkout left out of the path: every module of it then
comes from where that import found it. ``tests.unit.test_installed``
checks that it is the wheel.
"""

import os
import sys

if os.environ.get('NPH_TEST_INSTALLED') == '1' \
        and 'nova_pinning_hooks' not in sys.modules:
    _top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _path = sys.path[:]
    sys.path[:] = [p for p in _path
                   if os.path.abspath(p or os.curdir) != _top]
    try:
        import nova_pinning_hooks  # noqa: F401
    finally:
        sys.path[:] = _path
