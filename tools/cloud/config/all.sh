# shellcheck shell=bash
# tools/cloud.sh's part: every service's configuration, written anew by
# each "up" (one writer a service, in this folder). Sourced, never run.
# Invariant: the configuration directory and the key directories are
# root's alone (the files hold the cloud's passwords and keys).
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

write_configs() {
    mkdir -p "$etc"/{keystone,placement,glance,neutron,nova} \
        "$STATE"/{glance/images,glance/staging,glance/tasks,instances,fernet,credential}
    chmod 0700 "$etc" "$STATE/fernet" "$STATE/credential"
    local db="mysql+pymysql://nph:$PASS@127.0.0.1"
    local mq="rabbit://nph:$PASS@127.0.0.1:5672/"
    write_keystone_conf "$db"
    write_placement_conf "$db"
    write_glance_conf "$db"
    write_neutron_conf "$db" "$mq"
    write_nova_conf "$db" "$mq"
    write_compute_confs
    write_package_conf
}
