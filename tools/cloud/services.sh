# shellcheck shell=bash
# tools/cloud.sh's part: the control plane's services: the APIs under
# uwsgi (keystone, placement, glance, neutron, nova-api) and
# nova-conductor and nova-scheduler. Sourced, never run. Invariants:
# a service already running is left alone (spawn); each API start waits
# until it answers.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

# --- the API services under uwsgi -----------------------------------------
uwsgi_api() {  # NAME PORT "MODULE SCRIPT" ENV=VALUE [MORE INI LINES]
    local name=$1 port=$2 envvar=$4 more=${5:-}
    local app
    # shellcheck disable=SC2086  # $3 is "MODULE SCRIPT": two arguments
    app=$(wsgi_app $3)
    alive "$name" && return 0
    cat > "$etc/$name-uwsgi.ini" <<EOF
[uwsgi]
http-socket = 127.0.0.1:$port
$app
virtualenv = $venv
env = $envvar
master = true
processes = 2
enable-threads = true
lazy-apps = true
die-on-term = true
buffer-size = 65535
# uwsgi's http-socket closes connections silently: say so, or a client
# reuses a closed connection (ConnectionResetError).
add-header = Connection: close
http-raw-body = true
http-chunked-input = true
http-auto-chunked = true
chunked-input-limit = 10240000
post-buffering = 4096
$more
EOF
    spawn "$name" "$venv/bin/uwsgi" --ini "$etc/$name-uwsgi.ini"
}

start_apis() {
    uwsgi_api keystone 5000 "keystone.wsgi.api keystone-wsgi-public" \
        "OS_KEYSTONE_CONFIG_FILES=$etc/keystone/keystone.conf"
    wait_http http://127.0.0.1:5000/v3 keystone
    uwsgi_api placement 8778 "placement.wsgi.api placement-api" "OS_PLACEMENT_CONFIG_DIR=$etc/placement"
    uwsgi_api glance 9292 "glance.wsgi.api glance-wsgi-api" "OS_GLANCE_CONFIG_DIR=$etc/glance"
    uwsgi_api neutron 9696 "neutron.wsgi.api neutron-api" \
        "OS_NEUTRON_CONFIG_FILES=$etc/neutron/neutron.conf;$etc/neutron/ml2_conf.ini" \
        "pythonpath = $etc/neutron
import = nph_neutron_models"
    uwsgi_api nova-api 8774 "nova.wsgi.osapi_compute nova-api-wsgi" \
        "OS_NOVA_CONFIG_FILES=$etc/nova/api-paste.ini;$etc/nova/nova.conf;$etc/nova/nova-db.conf"
    wait_http http://127.0.0.1:8778/ placement
    wait_http http://127.0.0.1:9292/ glance
    wait_http http://127.0.0.1:9696/ neutron
    wait_http http://127.0.0.1:8774/ nova-api
}

# After bootstrap: nova 29's conductor asks keystone (as the nova user)
# at start and exits when that user does not exist yet.
start_nova_services() {
    spawn nova-conductor "$venv/bin/nova-conductor" --config-file "$etc/nova/nova.conf" \
        --config-file "$etc/nova/nova-db.conf" \
        --log-file "$LOG/nova-conductor.log"
    [ -f "$etc/nova/scheduler.conf" ] || write_weigher_conf \
        "$( [ "$package" = on ] && echo on || echo off)"
    spawn nova-scheduler "$venv/bin/nova-scheduler" --config-file "$etc/nova/nova.conf" \
        --config-file "$etc/nova/nova-db.conf" --config-file "$etc/nova/scheduler.conf" \
        --log-file "$LOG/nova-scheduler.log"
}

restart_scheduler() {  # and wait until the new one consumes its RPC queue
    local deadline=$(( $(date +%s) + 120 )) n
    stop_proc nova-scheduler
    # The old one's consumer gone first: the wait below is for the new
    # one's, not satisfied by what RabbitMQ has not dropped yet.
    until n=$(queue_consumers scheduler) && [ "$n" = 0 ]; do
        [ "$(date +%s)" -lt "$deadline" ] \
            || die "RabbitMQ still counts ${n:-unknown} consumers on scheduler 120 s after nova-scheduler ended"
        sleep 0.5
    done
    deadline=$(( $(date +%s) + DAEMON_START ))
    start_nova_services
    until n=$(queue_consumers scheduler) && [ "$n" -gt 0 ]; do
        alive nova-scheduler || die "nova-scheduler exited (see $LOG/nova-scheduler.log)"
        [ "$(date +%s)" -lt "$deadline" ] \
            || die "nova-scheduler did not consume its queue in $DAEMON_START s (see $LOG/nova-scheduler.log)"
        sleep 0.5
    done
}
