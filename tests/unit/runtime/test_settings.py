"""The configuration edge of every layer, read together
(``runtime.settings.read``: ``passes.settings``, ``observe.settings``
and the runtime's own fields): ``[nova_pinning]`` read once into frozen
records, each field its option."""

import dataclasses

import testtools

from nova_pinning_hooks import conf as conf_mod
from nova_pinning_hooks.host import virt
from nova_pinning_hooks.observe import settings as observe_settings
from nova_pinning_hooks.runtime import settings as runtime_settings
from tests.unit.passes.test_settings import make_conf


class TestRead(testtools.TestCase):
    """Each record field is the option of its name (or the one the
    table says), read once: a change to ``conf`` after ``read`` reaches
    no record."""

    # (record path, option, value set, value expected in the record)
    TABLE = [
        ('passes.enabled', 'enabled', False, False),
        ('passes.connection_uri', 'connection_uri', 'test:///default',
         'test:///default'),
        ('passes.lock_path', 'lock_path', '/run/x', '/run/x'),
        ('passes.times.lock_timeout', 'lock_timeout', 7.0, 7.0),
        ('passes.times.pass_timeout', 'pass_timeout', 9.0, 9.0),
        ('passes.times.resync_interval', 'resync_interval', 30.0, 30.0),
        ('passes.times.coalesce_delay', 'coalesce_delay', 0.5, 0.5),
        ('passes.times.vcpu_poll_interval', 'vcpu_poll_interval', 2.0,
         2.0),
        ('passes.times.periodic_interval', 'periodic_interval', 5.0, 5.0),
        ('passes.times.summary_max_age', 'summary_max_age', 120.0, 120.0),
        ('passes.host.busy_retries', 'busy_retries', 4, 4),
        ('passes.host.busy_retry_delay', 'busy_retry_delay', 0.25, 0.25),
        ('passes.host.set_home_node', 'set_home_node', True, True),
        ('passes.host.libvirt_call_timeout', 'libvirt_call_timeout', 3.0,
         3.0),
        ('passes.host.kernel_affinity', 'kernel_affinity', False, False),
        ('passes.ratio.allocation_ratio', 'allocation_ratio', 2.5, 2.5),
        ('passes.ratio.reserved_cpus', 'reserved_cpus', '0-1', '0-1'),
        ('passes.ratio.reserved_cpus', 'reserved_cpus', '', None),
        ('observe.metrics_textfile', 'metrics_textfile', '/x.prom',
         '/x.prom'),
        ('observe.metrics_textfile', 'metrics_textfile', '', None),
        ('observe.metrics_listen', 'metrics_listen', '127.0.0.1:9',
         '127.0.0.1:9'),
        ('observe.metrics_max_requests', 'metrics_max_requests', 3, 3),
        ('observe.metrics_read_timeout', 'metrics_read_timeout', 1.5,
         1.5),
        ('observe.metrics_max_requests_per_peer',
         'metrics_max_requests_per_peer', 2, 2),
        ('summary_file', 'summary_file', '/s.json', '/s.json'),
        ('report_summary', 'report_summary', False, False),
    ]

    @staticmethod
    def get(record, path):
        for name in path.split('.'):
            record = getattr(record, name)
        return record

    def test_each_field_is_its_option(self):
        for path, option, value, expected in self.TABLE:
            conf = make_conf(self, **{option: value})
            record = runtime_settings.read(conf)
            self.assertEqual(expected, self.get(record, path),
                             '%s from [nova_pinning] %s' % (path, option))

    def test_the_isolation_state_file(self):
        conf = make_conf(self)
        conf.set_override('state_file', '/iso.json',
                          group=conf_mod.ISOLATION_GROUP)
        self.assertEqual('/iso.json', observe_settings.read(
            conf).isolation_state_file)

    def test_every_host_option_is_read(self):
        # virt.HostOptions grows with the connection's options: each of
        # its fields is the option of its name.
        conf = make_conf(self)
        host = runtime_settings.read(conf).passes.host
        for f in dataclasses.fields(virt.HostOptions):
            self.assertEqual(getattr(conf.nova_pinning, f.name),
                             getattr(host, f.name), f.name)

    def test_records_are_frozen_and_read_once(self):
        conf = make_conf(self, pass_timeout=9.0)
        record = runtime_settings.read(conf)
        conf.set_override('pass_timeout', 1.0, group='nova_pinning')
        self.assertEqual(9.0, record.passes.times.pass_timeout)
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          record.passes.times, 'pass_timeout', 1.0)
        self.assertRaises(dataclasses.FrozenInstanceError, setattr,
                          record, 'passes', None)
