# shellcheck shell=bash
# tools/cloud.sh's part: nph-compute2 in kolla-ansible's containers
# (--compute2 kolla). Sourced, never run. Invariant: host 1 is never in
# kolla (in_kolla); the containers are tools/kolla-compute.sh's.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

# --- nph-compute2 in kolla-ansible's containers (--compute2 kolla) ---------
# tools/kolla-compute.sh starts them with kolla-ansible's options; what
# this cloud adds (doc/source/reference/deployments.rst, "The cloud's nph-compute2 in
# kolla's containers"): libvirtd on host 2's address and port; in both
# containers host 2's instances directory at the path nova.conf and
# compute 1 have (a block live migration copies each disk to the path
# its source XML names); nova_compute as root (the image has none of
# kolla's sudoers and rootwrap files that nova's privsep needs as nova),
# with both hosts' names, root's ssh client configuration for disk
# copies, the cloud's log directory, and its configuration where kolla
# mounts it. Both hosts' names reach nova_libvirt too, as kolla-ansible
# gives every host the inventory's names (its etc-hosts role, and host
# networking): the source libvirtd of a live migration out of nph-compute2
# connects to the destination by name ("Unable to resolve address
# 'nph-compute1'" put the server in ERROR without it).
KOLLA_PREFIX=nph_cloud_
in_kolla() { [ "$1" = 2 ] && [ "$compute2" = kolla ]; }

kolla_compute() {  # start|stop [compute]: tools/kolla-compute.sh for host 2
    local dir cmd=$1 conf=/var/lib/kolla/config_files f
    shift
    dir=$(host_dir 2)
    local command=/var/lib/kolla/venv/bin/nova-compute
    for f in nova.conf cpu-mode.conf compute2.conf pinning2.conf kolla.conf; do
        command+=" --config-file $conf/$f"
    done
    NPH_KOLLA_PREFIX=$KOLLA_PREFIX NPH_KOLLA_LIBVIRT_ADDR=${HOST_IPS[1]} NPH_KOLLA_NOVA_UID=0 \
    NPH_KOLLA_LIBVIRT_PORT=${LIBVIRT_PORTS[1]} \
    NPH_KOLLA_LIBVIRT_OPTS="-v $dir/instances:$STATE/instances
        -v $dir/hosts:/etc/hosts:ro" \
    NPH_KOLLA_COMPUTE_OPTS="--user root -v $dir/instances:$STATE/instances
        -v $dir/hosts:/etc/hosts:ro -v $STATE/ssh/client:/root/.ssh:ro
        -v $LOG:$LOG -v $dir/kolla-config:$conf:ro" \
    NPH_KOLLA_COMPUTE_COMMAND=$command \
        "$top/tools/kolla-compute.sh" "$cmd" "$dir" "$@" >>"$LOG/kolla-compute.log" 2>&1 \
        || die "tools/kolla-compute.sh $cmd $* failed (see $LOG/kolla-compute.log)"
}

start_kolla_libvirtd() {
    local dir uri="qemu+tcp://${HOST_IPS[1]}:${LIBVIRT_PORTS[1]}/system" sshd
    dir=$(host_dir 2)
    sshd=$(cat "$dir/run/sshd-nph.pid" 2>/dev/null || true)  # none: not running
    if [ "$(podman container inspect -f '{{.State.Running}}' \
            "${KOLLA_PREFIX}nova_libvirt" 2>/dev/null)" = true ] \
       && timeout "$VIRSH_PROBE" virsh -q -c "$uri" version >/dev/null 2>&1 \
       && [ -n "$sshd" ] && [ "$(cat "/proc/$sshd/comm" 2>/dev/null)" = sshd ]; then
        return 0
    fi
    stop_host 2
    mkdir -p "$dir"/{instances,nova,run,kolla-config} "$STATE/instances"
    chmod 0700 "$dir/kolla-config"  # nova.conf's passwords
    host_files 2
    # kolla runs sshd for nova's disk copies in its nova_ssh container
    # (as nova, port 8022): here the host's sshd, in a mount namespace
    # that sees host 2's instances where nova.conf says they are.
    # shellcheck disable=SC2016  # the inner bash expands them
    NPH_DIR=$dir NPH_INSTANCES=$STATE/instances \
    unshare -m --propagation private bash -c '
        set -e
        mount --bind "$NPH_DIR/instances" "$NPH_INSTANCES"
        mount --bind "$NPH_DIR/run" /run
        mkdir -p /run/sshd
        exec /usr/sbin/sshd -f "$NPH_DIR/sshd_config"
    ' </dev/null >>"$LOG/sshd2.log" 2>&1 || die "host 2's sshd did not start (see $LOG/sshd2.log)"
    kolla_compute start
    # A live migration from compute 1 is compute 1's libvirtd connecting
    # to this one (nova's peer-to-peer migration): it takes the
    # credentials from LIBVIRT_AUTH_FILE (above, when this script started
    # it) or its /etc/libvirt/auth.conf (compute 1's etc), as
    # kolla-ansible gives each nova_libvirt an auth.conf.
    if [ -d "$(host_dir 1)/etc" ]; then
        install -m 0600 "$dir/config/auth.conf" "$(host_dir 1)/etc/auth.conf"
    fi
}

start_kolla_compute() {
    local e=$etc/nova dir
    dir=$(host_dir 2)
    compute_running 2 && return 0
    # kolla-ansible's way: the files of /etc/kolla/nova-compute (here
    # DIR/kolla-config), mounted read-only at /var/lib/kolla/config_files
    # (kolla_start would copy them to /etc/nova: the image has no
    # kolla_start); nova-compute reads them in this order, later files'
    # options replacing earlier ones, as kolla-ansible's merge does.
    install -m 0600 "$e/nova.conf" "$e/cpu-mode.conf" "$e/compute2.conf" \
        "$e/pinning2.conf" "$dir/kolla-config/"
    cat > "$dir/kolla-config/kolla.conf" <<EOF
# The container's paths (kolla's): nova's state in the nova_compute
# volume, privsep's helper in kolla's venv (nova_compute runs as root).
[DEFAULT]
state_path = /var/lib/nova
[oslo_concurrency]
lock_path = /var/lib/nova/tmp
[libvirt]
# kolla-ansible sets it to the migration interface's address. Without a
# UTS namespace libvirtd's hostname is the machine's, which compute 1
# cannot resolve: the migration stream comes here by address.
live_migration_inbound_addr = ${HOST_IPS[1]}
[nova_sys_admin]
helper_command = /var/lib/kolla/venv/bin/privsep-helper
[privsep_osbrick]
helper_command = /var/lib/kolla/venv/bin/privsep-helper
[vif_plug_ovs_privileged]
helper_command = /var/lib/kolla/venv/bin/privsep-helper
[vif_plug_linux_bridge_privileged]
helper_command = /var/lib/kolla/venv/bin/privsep-helper
EOF
    chmod 0600 "$dir/kolla-config/kolla.conf"
    kolla_compute start compute
    started_computes+=(2)
}
