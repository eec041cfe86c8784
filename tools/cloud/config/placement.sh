# shellcheck shell=bash
# tools/cloud.sh's part: placement's configuration. Sourced, never run;
# write_configs calls it.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

write_placement_conf() {  # DB
    local db=$1
    { cat <<EOF
[DEFAULT]
log_file = $LOG/placement-app.log
[placement_database]
connection = $db/placement
[api]
auth_strategy = keystone
EOF
      authtoken placement; } > "$etc/placement/placement.conf"
}
