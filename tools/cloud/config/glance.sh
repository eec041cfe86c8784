# shellcheck shell=bash
# tools/cloud.sh's part: glance's configuration (the file store in the
# state directory). Sourced, never run; write_configs calls it.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

write_glance_conf() {  # DB
    local db=$1
    local v=$venv
    cp "$v/etc/glance/glance-api-paste.ini" "$etc/glance/"
    { cat <<EOF
[DEFAULT]
log_file = $LOG/glance-app.log
enabled_backends = file:file
[database]
connection = $db/glance
[paste_deploy]
flavor = keystone
[glance_store]
default_backend = file
[file]
filesystem_store_datadir = $STATE/glance/images
[os_glance_staging_store]
filesystem_store_datadir = $STATE/glance/staging
[os_glance_tasks_store]
filesystem_store_datadir = $STATE/glance/tasks
[oslo_policy]
enforce_new_defaults = true
EOF
      authtoken glance; } > "$etc/glance/glance-api.conf"
}
