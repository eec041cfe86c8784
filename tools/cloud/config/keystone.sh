# shellcheck shell=bash
# tools/cloud.sh's part: keystone's configuration (fernet tokens, keys
# in the state directory). Sourced, never run; write_configs calls it.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

write_keystone_conf() {  # DB
    local db=$1
    cat > "$etc/keystone/keystone.conf" <<EOF
[DEFAULT]
log_file = $LOG/keystone-app.log
[database]
connection = $db/keystone
[token]
provider = fernet
[fernet_tokens]
key_repository = $STATE/fernet
[credential]
key_repository = $STATE/credential
EOF
}
