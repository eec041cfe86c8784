"""A configuration as nova-compute's: nova's options the package reads
and the package's own, for the tests of the layers that run in it."""

import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture

from nova_pinning_hooks import conf as conf_mod
from tests.fixtures import register_nova_options


def nova_like_conf(test, **pinning):
    """A ConfigOpts with the nova options the agent reads."""
    conf = cfg.ConfigOpts()
    register_nova_options(conf)
    conf_mod.register_opts(conf)
    cf = test.useFixture(config_fixture.Config(conf))
    tmp = test.useFixture(fixtures.TempDir()).path
    values = dict(lock_path=tmp, overcommit_file=tmp + '/oc.json',
                  summary_file=tmp + '/summary.json',
                  coalesce_delay=0, periodic_interval=0)
    values.update(pinning)
    cf.config(group='nova_pinning', **values)
    conf([], default_config_files=[])
    return conf
