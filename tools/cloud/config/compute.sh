# shellcheck shell=bash
# tools/cloud.sh's part: each nova-compute's own configuration
# (compute1.conf, compute2.conf: its host name, address and libvirtd).
# Sourced, never run; write_configs calls it.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

write_compute_confs() {  # both hosts' compute<N>.conf
    local i
    for i in 1 2; do
        local other=$((3 - i))
        { cat <<EOF
[DEFAULT]
host = nph-compute$i
my_ip = ${HOST_IPS[$((i - 1))]}
log_file = $LOG/nova-compute$i.log
state_path = $STATE/compute$i/nova
[libvirt]
connection_uri = qemu+tcp://${HOST_IPS[$((i - 1))]}:${LIBVIRT_PORTS[$((i - 1))]}/system
live_migration_uri = qemu+tcp://%s:${LIBVIRT_PORTS[$((other - 1))]}/system
EOF
          if [ "$i" = 2 ]; then
              # nova's own pins: a dedicated set for hw:cpu_policy=dedicated
              # guests, the rest shared (nova writes <vcpu cpuset=...>).
              printf '[compute]\ncpu_dedicated_set = 1\ncpu_shared_set = 0\n'
          fi
        } > "$etc/nova/compute$i.conf"
    done
}
