"""nova's notifications keep flowing with the package on.

The package is switched on by naming its notification driver in
``[oslo_messaging_notifications] driver``, an option that takes several
values; a cloud whose other services (ceilometer, designate, ...) consume
nova's notifications has ``driver = messagingv2`` there too. The cloud's
computes run with both (tools/cloud.sh, as doc/source/reference/deployments.rst
tells
kolla-ansible and OpenStack-Ansible operators), and this test reads
nova's versioned notifications from RabbitMQ, the queue their topic
fills (``versioned_notifications.info``), while the package pins the
guest: ``instance.create.end`` and ``instance.power_off.end`` of this
very server must be there.
"""

import json
import time

import amqp

from tests.cloud import base

RABBIT = dict(host='127.0.0.1:5672', userid='nph',
              password='nph-cloud-secret', virtual_host='/')
QUEUE = 'versioned_notifications.info'


def drain(channel, limit=5000):
    """Every notification in the queue now: [(event_type, instance uuid)]."""
    seen = []
    for _ in range(limit):
        msg = channel.basic_get(QUEUE, no_ack=True)
        if msg is None:
            break
        body = json.loads(msg.body)
        if 'oslo.message' in body:  # oslo.messaging's envelope
            body = json.loads(body['oslo.message'])
        data = body.get('payload', {}).get('nova_object.data', {})
        seen.append((body.get('event_type'), data.get('uuid')))
    return seen


class TestNotifications(base.CloudTestCase):

    def setUp(self):
        super().setUp()
        if base.package_state() != 'on':
            base.cloud('package', 'on')
        self.conn = amqp.Connection(connect_timeout=10, **RABBIT)
        self.conn.connect()
        self.addCleanup(self.conn.close)
        self.channel = self.conn.channel()

    def queue_there(self):
        try:
            self.channel.queue_declare(QUEUE, passive=True)
            return True
        except amqp.exceptions.NotFound:
            # A passive declare of a missing queue closes the channel.
            self.channel = self.conn.channel()
            return False

    def test_nova_notifications_reach_rabbitmq_while_the_package_pins(self):
        if self.queue_there():
            drain(self.channel)  # what earlier tests left
        server = self.boot('notify', host='nph-compute1')
        self.assert_pinned()
        self.admin.compute.stop_server(server)
        self.wait_status(server, 'SHUTOFF')
        wanted = {'instance.create.end', 'instance.power_off.end'}
        seen = set()
        deadline = time.monotonic() + 30
        while not wanted <= seen and time.monotonic() < deadline:
            if self.queue_there():
                seen |= {event for event, uuid in drain(self.channel)
                         if uuid == server.id}
            time.sleep(0.5)
        self.assertEqual(wanted, wanted & seen,
                         'nova notifications of %s seen in RabbitMQ: %s'
                         % (server.id, sorted(seen)))
        self.assert_no_compute_error()
