"""Make nova's api-paste.ini reachable where nova's functional fixtures
look for it (site-packages/etc/nova), from the copy pip installed under
the virtualenv's etc/nova. Idempotent; run by tox before the
nova-functional tests."""

import os
import sys
import sysconfig

site = sysconfig.get_paths()['purelib']
want = os.path.join(site, 'etc', 'nova')
have = os.path.join(sys.prefix, 'etc', 'nova')
if not os.path.exists(os.path.join(want, 'api-paste.ini')):
    if not os.path.exists(os.path.join(have, 'api-paste.ini')):
        sys.exit('nova-test-etc: no api-paste.ini under %s' % have)
    os.makedirs(os.path.dirname(want), exist_ok=True)
    if os.path.islink(want):
        os.unlink(want)
    os.symlink(have, want)
print('nova-test-etc: %s -> %s' % (want, os.path.realpath(want)))
