# shellcheck shell=bash
# tools/cloud.sh's part: nova's configuration for every nova service
# (nova.conf) and the databases for the API, conductor and scheduler
# only (nova-db.conf). Sourced, never run; write_configs calls it.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

write_nova_conf() {  # DB MQ
    local db=$1 mq=$2
    local v=$venv
    cp "$v/etc/nova/api-paste.ini" "$etc/nova/"
    { cat <<EOF
[DEFAULT]
log_file = $LOG/nova-app.log
transport_url = $mq
my_ip = 127.0.0.1
state_path = $STATE/nova
instances_path = $STATE/instances
compute_driver = libvirt.LibvirtDriver
# A compute host that boots again starts the guests that ran on it, as
# operators set it (cloud.sh reboot-host, tests/day2).
resume_guests_state_on_host_boot = true
# The guests spin in a boot sector and never shut down cleanly: do not
# wait a minute for them at each stop (nor two at each soft reboot).
shutdown_timeout = 1
# One host can take a resize (tests/cloud resizes on the same host).
allow_resize_to_same_host = true
[wsgi]
api_paste_config = $etc/nova/api-paste.ini
[oslo_concurrency]
lock_path = $STATE/nova-lock
[scheduler]
discover_hosts_in_cells_interval = 2
[notifications]
# What the computes send to RabbitMQ (pinning<N>.conf names the drivers):
# nova's versioned notifications, instance.create.end and the like.
notification_format = versioned
[compute]
# A ratio an operator sets in placement reaches nova (and the package's
# overcommit file) within seconds, not the default 5 minutes.
resource_provider_association_refresh = 10
[vnc]
enabled = false
[spice]
enabled = false
[glance]
region_name = RegionOne
[image_cache]
manager_interval = -1
[libvirt]
virt_type = $(cat /run/nova-pinning-hooks/virt-type 2>/dev/null || echo kvm)
wait_soft_reboot_seconds = 1
# Everything runs as root here: privsep's helpers start directly (not
# through sudo and a rootwrap configuration).
[nova_sys_admin]
helper_command = $v/bin/privsep-helper
[privsep_osbrick]
helper_command = $v/bin/privsep-helper
[vif_plug_ovs_privileged]
helper_command = $v/bin/privsep-helper
[vif_plug_linux_bridge_privileged]
helper_command = $v/bin/privsep-helper
[workarounds]
# This nested CPU is Broadwell to libvirt and kvm64 to QEMU.
skip_cpu_compare_on_dest = true
EOF
      authtoken nova; echo
      auth_section placement nova; echo
      auth_section neutron nova; echo
      auth_section service_user nova
      echo "send_service_user_token = true"; } > "$etc/nova/nova.conf"
    # The databases, for the API, conductor and scheduler only: a
    # nova-compute with database settings logs "No DB access allowed".
    cat > "$etc/nova/nova-db.conf" <<EOF
[api_database]
connection = $db/nova_api
[database]
connection = $db/nova_cell1
EOF
}
