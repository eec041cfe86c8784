# shellcheck shell=bash
# tools/cloud.sh's part: the databases, their user and their schemas
# (once a series). Sourced, never run. Invariant: the schemas are made
# once (the .synced-SERIES stamp), the databases and user on every "up".
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

databases() {
    local d
    for d in keystone placement glance neutron nova_api nova_cell0 nova_cell1; do
        sql "CREATE DATABASE IF NOT EXISTS $d CHARACTER SET utf8mb4"
    done
    sql "CREATE USER IF NOT EXISTS 'nph'@'127.0.0.1' IDENTIFIED BY '$PASS';
         GRANT ALL PRIVILEGES ON *.* TO 'nph'@'127.0.0.1'; FLUSH PRIVILEGES"
    [ -f "$STATE/.synced-$series" ] && return 0
    log "creating the databases (once)"
    local kc="--config-file $etc/keystone/keystone.conf"
    # shellcheck disable=SC2086  # $kc and $nc: options, split into words
    {
        "$venv/bin/keystone-manage" $kc db_sync
        "$venv/bin/keystone-manage" $kc fernet_setup --keystone-user root --keystone-group root
        "$venv/bin/keystone-manage" $kc credential_setup --keystone-user root --keystone-group root
        "$venv/bin/keystone-manage" $kc bootstrap --bootstrap-password "$PASS" \
            --bootstrap-admin-url http://127.0.0.1:5000/v3 \
            --bootstrap-internal-url http://127.0.0.1:5000/v3 \
            --bootstrap-public-url http://127.0.0.1:5000/v3 \
            --bootstrap-region-id RegionOne
        "$venv/bin/placement-manage" --config-file "$etc/placement/placement.conf" db sync
        "$venv/bin/glance-manage" --config-dir "$etc/glance" db_sync
        "$venv/bin/neutron-db-manage" --config-file "$etc/neutron/neutron.conf" \
            --config-file "$etc/neutron/ml2_conf.ini" upgrade head
        local nc="--config-file $etc/nova/nova.conf --config-file $etc/nova/nova-db.conf"
        "$venv/bin/nova-manage" $nc api_db sync
        "$venv/bin/nova-manage" $nc cell_v2 map_cell0 \
            --database_connection "mysql+pymysql://nph:$PASS@127.0.0.1/nova_cell0"
        "$venv/bin/nova-manage" $nc cell_v2 list_cells | grep -q ' cell1 ' || \
            "$venv/bin/nova-manage" $nc cell_v2 create_cell --name cell1
        "$venv/bin/nova-manage" $nc db sync
    } > "$LOG/db-sync.log" 2>&1 || die "database set-up failed (see $LOG/db-sync.log)"
    touch "$STATE/.synced-$series"
}
