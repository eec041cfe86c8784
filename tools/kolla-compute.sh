#!/bin/bash
# A compute host in kolla-ansible's container layout, with Debian's podman
# and the images of tools/kolla-images.sh: nph_nova_libvirt, and on
# request nph_nova_compute and the package's agents as sibling containers
# (as kolla-ansible runs ironic_prometheus_exporter beside ironic), each
# started with the options kolla-ansible's nova-cell role gives it
# (ansible/roles/nova-cell/defaults/main.yml at openstack/kolla-ansible
# 1a68181; doc/source/reference/deployments.rst has the table, option by option).
#
#   tools/kolla-compute.sh start DIR [compute] [agent] [isolate]
#       # prints libvirt's URI, as kolla's nova.conf names it
#   tools/kolla-compute.sh stop DIR [compute]
#       # compute: nph_nova_compute only (a restart of nova-compute)
#   tools/kolla-compute.sh undo DIR
#       # the isolation agent's container stopped (SIGTERM: its watch
#       # ends, what it confined stays), then `nova-pinning-isolate undo`
#       # in a one-shot container with the same options: reference/deployments.rst's way
#       # to switch it off
#
# One difference is necessary on this machine: it has its own libvirtd on
# /run/libvirt, so the containers' /run is DIR/run (kolla mounts the
# host's /run), and libvirt's state (/var/lib/libvirt, /etc/libvirt/qemu)
# is under DIR too; the containerised libvirtd listens on 127.0.0.1:PORT
# (kolla: the migration interface's address, port 16509, which the host's
# daemon may hold).
#
# libvirtd's TCP socket asks for a user and password (SASL DIGEST-MD5, as
# kolla-ansible's libvirt_enable_sasl, its default, without TLS): a
# libvirtd that accepts anyone on loopback gives every local user of the
# machine root. The password is made once per DIR; the host's clients
# (virsh, the tests, another compute's libvirtd for a migration) read
# DIR/config/auth.conf through LIBVIRT_AUTH_FILE, nova_compute its copy
# at /etc/libvirt/auth.conf (kolla-ansible's auth.conf).
#
# The package's agents are not kolla-ansible's containers: they run
# without --privileged, with no capability but the one each needs, a
# read-only root and only the host paths each uses (doc/source/
# reference/deployments.rst, "The isolation agent and nova-pinning agent"; never the
# host's whole /run, which holds the container engine's socket).
#
# What tools/cloud.sh sets to run its nph-compute2 this way (cloud.sh's
# --compute2 kolla): NPH_KOLLA_LIBVIRT_ADDR (listen_addr, default
# 127.0.0.1), NPH_KOLLA_LIBVIRT_PORT, NPH_KOLLA_PREFIX (the containers'
# names), NPH_KOLLA_NOVA_UID (who owns the state directory's nova/), and NPH_KOLLA_LIBVIRT_OPTS and NPH_KOLLA_COMPUTE_OPTS: more
# podman run options for nova_libvirt and nova_compute (its config
# directory, the instances directory, names in /etc/hosts, the user).
#
# nph_nova_compute runs $NPH_KOLLA_COMPUTE_COMMAND (default: sleep, a
# stand-in for nova-compute that commands are exec'd beside);
# nph_pinning_agent runs `nova-pinning agent` and nph_pinning_isolate
# `nova-pinning-isolate watch`, both with DIR/etc/nova-pinning-hooks.conf
# (the isolation agent: DIR/etc/$NPH_KOLLA_ISOLATE_CONF if set).
# The isolation agent confines the host's own processes: never start it
# on a machine shared with other work.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/lib/common.sh
. "$top/tools/lib/common.sh"

cmd=${1:-}
dir=${2:-}
if [ -z "$dir" ] || { [ "$cmd" != start ] && [ "$cmd" != stop ] && [ "$cmd" != undo ]; }; then
    echo "usage: tools/kolla-compute.sh start DIR [compute] [agent] [isolate] | stop DIR [compute] | undo DIR" >&2
    exit 2
fi
need_root
shift 2
port=${NPH_KOLLA_LIBVIRT_PORT:-16530}
addr=${NPH_KOLLA_LIBVIRT_ADDR:-127.0.0.1}
uri="qemu+tcp://$addr:$port/system"
prefix=${NPH_KOLLA_PREFIX:-nph_}
libvirt_name=${prefix}nova_libvirt
compute_name=${prefix}nova_compute
agent_name=${prefix}pinning_agent
isolate_name=${prefix}pinning_isolate
# The host's clients' credentials for this libvirtd (made below), for
# the virsh calls here.
if [ -f "$dir/config/auth.conf" ]; then
    export LIBVIRT_AUTH_FILE=$dir/config/auth.conf
fi

if [ "$cmd" = stop ] && [ "${1:-}" = compute ]; then
    # nova-compute alone (its restart): the guests and libvirtd stay.
    podman rm -f -t 5 "$compute_name" >/dev/null 2>&1 || true  # absent already
    exit 0
fi
if [ "$cmd" = stop ]; then
    # Guests can outlive nova_libvirt (libvirt moves each qemu into
    # cgroups of its own, /machine/..., in the controllers it manages;
    # on this cgroup v1 host without systemd it leaves qemu in the
    # container's pids and name=systemd cgroups, so podman's stop kills
    # it here: tests/day2, doc/source/reference/nova-integration.rst "Day two"): destroy them
    # first, so none is left behind either way.
    if podman container exists "$libvirt_name" 2>/dev/null; then
        for dom in $(timeout 10 virsh -q -c "$uri" list --name 2>/dev/null); do
            timeout 10 virsh -q -c "$uri" destroy "$dom" >/dev/null 2>&1 || true  # ended meanwhile
        done
    fi
    for name in "$isolate_name" "$agent_name" "$compute_name" "$libvirt_name"; do
        podman rm -f -t 5 "$name" >/dev/null 2>&1 || true  # absent already
    done
    exit 0
fi

for want in "$@"; do
    case "$want" in
        compute|agent|isolate) ;;
        *) die "unknown container $want (compute, agent or isolate)" ;;
    esac
done

images=$("$top/tools/kolla-images.sh" build)
libvirt_image=$(sed -n 's/^nova_libvirt=//p' <<<"$images")
compute_image=$(sed -n 's/^nova_compute=//p' <<<"$images")
runtime=$(sed -n 's/^runtime=//p' <<<"$images")
containers_conf=$(sed -n 's/^containers_conf=//p' <<<"$images")
# kolla-images.sh says where podman's default ulimits cannot be set.
if [ -n "$containers_conf" ]; then export CONTAINERS_CONF=$containers_conf; fi
podman() { command podman --runtime "$runtime" "$@"; }

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# DIR/run stands for the host's /run; lib, qemu and nova for kolla's
# named volumes libvirtd, nova_libvirt_qemu and nova_compute; log for
# kolla_logs; config for kolla's config directory; state and etc for the
# package's state directory and configuration (reference/deployments.rst).
mkdir -p "$dir"/{run/libvirt/qemu,run/lock,lib/qemu,qemu,nova,log,config,etc}
# The state directory as reference/deployments.rst has operators make it: root's, with
# nova/ for the user nova-compute runs as: the image's nova (kolla's uid
# 42436), or NPH_KOLLA_NOVA_UID (the cloud's runs as root, and the
# package uses no directory another user can write).
nova_uid=${NPH_KOLLA_NOVA_UID:-42436}
install -d -m 0755 "$dir/state"
install -d -m 0755 -o "$nova_uid" -g "$nova_uid" "$dir/state/nova"
chown 42436:42436 "$dir/nova"

# kolla-ansible's libvirtd.conf, qemu.conf and sasl.conf (ansible/roles/
# nova-cell/templates, libvirt_enable_sasl true, no TLS: its
# libvirt_sasl_mech_list is then DIGEST-MD5, the one mechanism of
# Debian's Cyrus SASL with the security layer libvirtd asks of a plain
# TCP client); qemu's max_files/max_processes are left out: this sandbox
# refuses to raise a process's limits.
cat > "$dir/config/libvirtd.conf" <<EOF
listen_tcp = 1
listen_tls = 0
auth_tcp = "sasl"
tcp_port = "$port"
ca_file = ""
log_level = 3
log_outputs = "3:file:/var/log/kolla/libvirt/libvirtd.log"
listen_addr = "$addr"
EOF
cat > "$dir/config/qemu.conf" <<'EOF'
stdio_handler = "logd"
user = "nova"
group = "nova"
EOF
cat > "$dir/config/sasl.conf" <<'EOF'
mech_list: digest-md5
sasldb_path: /etc/libvirt/passwd.db
EOF
# The SASL user and its password (kolla-ansible's libvirt_sasl_authname
# and libvirt_sasl_password): made once, root's alone. The host's
# clients' auth.conf and nova_compute's (kolla-ansible's, owned by the
# user nova-compute runs as) give them for any libvirtd that asks: only
# this one does here.
(umask 077
 if [ ! -s "$dir/config/sasl-password" ]; then
     head -c 24 /dev/urandom | base64 | tr -d '/+=\n' > "$dir/config/sasl-password"
 fi)
sasl_user=nova
sasl_password=$(cat "$dir/config/sasl-password")
(umask 077
 printf '[credentials-default]\nauthname=%s\npassword=%s\n\n[auth-libvirt-default]\ncredentials=default\n' \
     "$sasl_user" "$sasl_password" > "$dir/config/auth.conf"
 cp "$dir/config/auth.conf" "$dir/config/compute-auth.conf")
chmod 0600 "$dir/config/sasl-password" "$dir/config/auth.conf" \
    "$dir/config/compute-auth.conf"
chown "$nova_uid:$nova_uid" "$dir/config/compute-auth.conf"
export LIBVIRT_AUTH_FILE=$dir/config/auth.conf
mkdir -p "$dir/log/libvirt"
if [ ! -f "$dir/etc/nova-pinning-hooks.conf" ]; then
    # The agents reach libvirt through its UNIX socket in /run/libvirt
    # (reference/deployments.rst runs them with --network none).
    printf '[nova_pinning]\nconnection_uri = qemu:///system\n' \
        > "$dir/etc/nova-pinning-hooks.conf"
fi

# kolla mounts the host's /lib/modules read-only (for modprobe); this
# sandbox has none, and a mount of a missing path fails the start.
modules=()
[ -d /lib/modules ] && modules=(-v /lib/modules:/lib/modules:ro)

# The package's state directory and configuration, as reference/deployments.rst adds
# them through nova_compute_extra_volumes.
extra=(-v "$dir/state:/var/lib/nova-pinning-hooks"
       -v "$dir/etc:/etc/nova-pinning-hooks:ro")
conf=/etc/nova-pinning-hooks/nova-pinning-hooks.conf
isolate_conf=/etc/nova-pinning-hooks/${NPH_KOLLA_ISOLATE_CONF:-nova-pinning-hooks.conf}
# What both agents' containers are not given: --privileged, a capability
# beyond the one each needs, new privileges (setuid binaries, file
# capabilities), a writable root, a network, the host's /run (the
# container engine's socket is there: host root through its API).
least=(--cap-drop ALL --security-opt no-new-privileges --read-only
       --network none)
# reference/deployments.rst's isolation agent: the host's PID and cgroup namespaces,
# the cgroup tree read-only (on a systemd host systemd sets AllowedCPUs=,
# asked over the bus); on cgroup v1 only (issue 48, R5-L1) it moves host
# processes between cgroups itself (the tree, writable), sets threads'
# affinity back at undo (CAP_SYS_NICE: the kernel asks it to move a
# process with capabilities it lacks, and to set another user's
# affinity) and makes its group at the root of the cpuset (and memory)
# hierarchy, a directory of mode 0555 even to root (CAP_DAC_OVERRIDE); it
# writes interrupts' affinity (/proc/irq, which podman makes read-only:
# unmasked) and the unbound workqueues' cpumask; it reads libvirt's qemu
# pid files (which CPUs are one-to-one) and the state directory (its own
# state, nova's overcommit file); systemd's own socket and the host's
# system bus where systemd runs (AllowedCPUs= over D-Bus).
isolate_v1=()
cgroup_tree=/sys/fs/cgroup:/sys/fs/cgroup:ro
if [ -e /sys/fs/cgroup/cpuset/cpuset.cpus ]; then
    isolate_v1=(--cap-add SYS_NICE --cap-add DAC_OVERRIDE)
    cgroup_tree=/sys/fs/cgroup:/sys/fs/cgroup
fi
isolate_opts=("${least[@]}" "${isolate_v1[@]}" --pid host --cgroupns host
              --security-opt unmask=/proc/irq
              -v "$cgroup_tree"
              -v /sys/devices/virtual/workqueue:/sys/devices/virtual/workqueue
              -v "$dir/run/libvirt/qemu:/run/libvirt/qemu:ro"
              "${extra[@]}"
              --user root)
# systemd's own socket first (issue 60: no other process can send on
# it), read-only: a socket is connected to, not written; the directory,
# since systemd makes the socket anew when it re-executes.
if [ -S /run/systemd/private ]; then
    isolate_opts+=(-v /run/systemd:/run/systemd:ro)
fi
if [ -S /run/dbus/system_bus_socket ]; then
    isolate_opts+=(-v /run/dbus:/run/dbus)
fi
# reference/deployments.rst's binding agent: the host's PID namespace (the qemu
# processes' /proc: pins, proof, schedstat) and cgroup namespace with the
# memory controller's tree read-only (a guest's memory by NUMA node: on
# cgroup v1 its own hierarchy, since a read-only bind of /sys/fs/cgroup
# leaves the controllers mounted under it writable; on v2 the one
# hierarchy); libvirt's UNIX socket (the directory: libvirtd makes the
# socket anew at each start); the state directory read-only (it takes
# the pass lock, an flock on the directory, and reads nova's overcommit
# file); no capability at all (a guest whose memory its cgroup does not
# tell, hugepage-backed, falls back to /proc/<pid>/numa_maps, which
# needs CAP_SYS_PTRACE: reference/deployments.rst).
memory_cgroup=/sys/fs/cgroup
[ -d /sys/fs/cgroup/memory ] && memory_cgroup=/sys/fs/cgroup/memory
agent_opts=("${least[@]}" --pid host --cgroupns host
            -v "$memory_cgroup:$memory_cgroup:ro"
            -v "$dir/run/libvirt:/run/libvirt:ro"
            -v "$dir/state:/var/lib/nova-pinning-hooks:ro"
            -v "$dir/etc:/etc/nova-pinning-hooks:ro"
            --user root)

if [ "$cmd" = undo ]; then
    podman stop -t 10 "$isolate_name" >/dev/null 2>&1 || true  # not running
    podman rm -f "$isolate_name" >/dev/null 2>&1 || true  # absent already
    podman run --rm --name "${isolate_name}_undo" "${isolate_opts[@]}" \
        "$compute_image" \
        /var/lib/kolla/venv/bin/nova-pinning-isolate --config-file "$isolate_conf" undo
    exit
fi

running() {
    [ "$(podman container inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" = true ]
}

# nova_libvirt: privileged, pid_mode host, cgroupns_mode host (nova-cell
# defaults); kolla_container runs every container with network_mode host
# (ansible/module_utils/kolla_podman_worker.py); volumes from
# nova_libvirt_default_volumes. Under podman kolla also mounts
# run_default_volumes_podman (/run/netns, /run/lock/nova, /run/libvirt,
# /run/nova, /run/openvswitch, each :shared, from the host's /run): here
# they are parts of DIR/run, which is mounted whole.
if ! running "$libvirt_name"; then
    podman rm -f "$libvirt_name" >/dev/null 2>&1 || true  # absent already
    # shellcheck disable=SC2086  # the caller's options: words, split
    podman run -d --name "$libvirt_name" ${NPH_KOLLA_LIBVIRT_OPTS:-} \
        --privileged --pid host --cgroupns host --network host \
        -v "$dir/config/libvirtd.conf:/etc/libvirt/libvirtd.conf:ro" \
        -v "$dir/config/qemu.conf:/etc/libvirt/qemu.conf:ro" \
        -v "$dir/config/sasl.conf:/etc/sasl2/libvirt.conf:ro" \
        "${modules[@]}" \
        -v "$dir/run:/run" \
        -v /dev:/dev \
        --mount type=devpts,destination=/dev/pts \
        -v /sys/fs/cgroup:/sys/fs/cgroup \
        -v "$dir/log:/var/log/kolla" \
        -v "$dir/lib:/var/lib/libvirt" \
        -v "$dir/nova:/var/lib/nova" \
        -v "$dir/qemu:/etc/libvirt/qemu" \
        "$libvirt_image" >/dev/null
fi
# kolla-ansible's "Configure libvirt SASL" (saslpasswd2 in nova_libvirt):
# the user in libvirt's sasldb, in the realm of the container's hostname
# (DIGEST-MD5's default). Again at each start: the container is new.
if ! printf '%s' "$sasl_password" | podman exec -i "$libvirt_name" \
        saslpasswd2 -p -c -a libvirt -f /etc/libvirt/passwd.db "$sasl_user"; then
    echo "kolla-compute.sh: saslpasswd2 failed in $libvirt_name" >&2
    exit 1
fi
# libvirtd answers within a second or two of its start on a quiet host;
# the bound is a loaded host's.
# shellcheck disable=SC2016  # the inner bash expands $1
if ! timeout 120 bash -c 'until timeout 30 virsh -q -c "$1" version >/dev/null 2>&1; do
                              sleep 0.2; done' answer "$uri"; then
    echo "kolla-compute.sh: $libvirt_name does not answer on $uri" >&2
    try "podman logs $libvirt_name" podman logs --tail 20 "$libvirt_name" >&2
    exit 1
fi

for want in "$@"; do
    case "$want" in
    compute)
        # nova_compute: privileged, ipc_mode host, no pid_mode (its own
        # PID namespace), no cgroupns_mode (podman's default: host on
        # cgroup v1), LIBGUESTFS_BACKEND=direct; volumes from
        # nova_compute_default_volumes (nova_libvirt_volume and
        # nova_instance_datadir_volume are the named volumes libvirtd and
        # nova_compute when libvirt runs in a container).
        running "$compute_name" && continue
        podman rm -f "$compute_name" >/dev/null 2>&1 || true  # absent already
        # shellcheck disable=SC2086  # the caller's options and command: words, split
        podman run -d --name "$compute_name" ${NPH_KOLLA_COMPUTE_OPTS:-} \
            --privileged --ipc host --network host \
            -e LIBGUESTFS_BACKEND=direct \
            "${modules[@]}" \
            -v "$dir/run:/run" \
            -v /dev:/dev \
            -v "$dir/log:/var/log/kolla" \
            -v "$dir/lib:/var/lib/libvirt" \
            -v "$dir/nova:/var/lib/nova" \
            -v "$dir/config/compute-auth.conf:/etc/libvirt/auth.conf:ro" \
            "${extra[@]}" \
            "$compute_image" ${NPH_KOLLA_COMPUTE_COMMAND:-sleep infinity} >/dev/null
        ;;
    agent)
        # reference/deployments.rst's binding agent container (agent_opts above).
        running "$agent_name" && continue
        podman rm -f "$agent_name" >/dev/null 2>&1 || true  # absent already
        podman run -d --name "$agent_name" "${agent_opts[@]}" \
            "$compute_image" \
            /var/lib/kolla/venv/bin/nova-pinning --config-file "$conf" agent \
            >/dev/null
        ;;
    isolate)
        running "$isolate_name" && continue
        podman rm -f "$isolate_name" >/dev/null 2>&1 || true  # absent already
        podman run -d --name "$isolate_name" "${isolate_opts[@]}" \
            "$compute_image" \
            /var/lib/kolla/venv/bin/nova-pinning-isolate --config-file "$isolate_conf" watch \
            >/dev/null
        ;;
    esac
done
echo "$uri"
