# shellcheck shell=bash
# tools/cloud.sh's part: neutron-server's configuration (ML2, no agents)
# and the module its uwsgi workers import first. Sourced, never run;
# write_configs calls it.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

write_neutron_conf() {  # DB MQ
    local db=$1 mq=$2
    local v=$venv
    cp "$v/etc/neutron/api-paste.ini" "$etc/neutron/"
    { cat <<EOF
[DEFAULT]
log_file = $LOG/neutron-app.log
core_plugin = ml2
service_plugins =
auth_strategy = keystone
transport_url = $mq
api_paste_config = $etc/neutron/api-paste.ini
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
[database]
connection = $db/neutron
[ml2]
type_drivers = flat
tenant_network_types =
mechanism_drivers =
extension_drivers =
[oslo_concurrency]
lock_path = $STATE/neutron-lock
EOF
      authtoken neutron; echo; auth_section nova nova; } > "$etc/neutron/neutron.conf"
    : > "$etc/neutron/ml2_conf.ini"
    # neutron's port query reads Port.port_forwardings, a backref that
    # exists only once SQLAlchemy has configured the mappers (after a
    # first query of another kind) and the port forwarding model is
    # imported: without this, a fresh worker answers GET /v2.0/ports with
    # HTTP 500, and nova with it. Each uwsgi worker imports this first.
    cat > "$etc/neutron/nph_neutron_models.py" <<EOF
import neutron.db.migration.models.head  # noqa: F401  (every model)
from sqlalchemy import orm
orm.configure_mappers()
EOF
}
