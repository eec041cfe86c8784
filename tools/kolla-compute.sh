#!/bin/bash
# A compute host in kolla-ansible's container layout, with Debian's podman
# and the images of tools/kolla-images.sh: nph_nova_libvirt, and on
# request nph_nova_compute and the package's agents as sibling containers
# (as kolla-ansible runs ironic_prometheus_exporter beside ironic), each
# started with the options kolla-ansible's nova-cell role gives it
# (ansible/roles/nova-cell/defaults/main.yml at openstack/kolla-ansible
# 1a68181; doc/source/deploy.rst has the table, option by option).
#
#   tools/kolla-compute.sh start DIR [compute] [agent] [isolate]
#       # prints libvirt's URI, as kolla's nova.conf names it
#   tools/kolla-compute.sh stop DIR [compute]
#       # compute: nph_nova_compute only (a restart of nova-compute)
#   tools/kolla-compute.sh undo DIR
#       # the isolation agent's container stopped (SIGTERM: its watch
#       # ends, what it confined stays), then `nova-pinning-isolate undo`
#       # in a one-shot container with the same options: deploy.rst's way
#       # to switch it off
#
# One difference is necessary on this machine: it has its own libvirtd on
# /run/libvirt, so the containers' /run is DIR/run (kolla mounts the
# host's /run), and libvirt's state (/var/lib/libvirt, /etc/libvirt/qemu)
# is under DIR too; the containerised libvirtd listens on 127.0.0.1:PORT
# (kolla: the migration interface's address, port 16509, which the host's
# daemon may hold).
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

cmd=${1:-}
dir=${2:-}
if [ -z "$dir" ] || { [ "$cmd" != start ] && [ "$cmd" != stop ] && [ "$cmd" != undo ]; }; then
    echo "usage: tools/kolla-compute.sh start DIR [compute] [agent] [isolate] | stop DIR [compute] | undo DIR" >&2
    exit 2
fi
if [ "$(id -u)" != 0 ]; then
    echo "kolla-compute.sh: run me as root" >&2
    exit 2
fi
shift 2
top=$(cd "$(dirname "$0")/.." && pwd)
port=${NPH_KOLLA_LIBVIRT_PORT:-16530}
addr=${NPH_KOLLA_LIBVIRT_ADDR:-127.0.0.1}
uri="qemu+tcp://$addr:$port/system"
prefix=${NPH_KOLLA_PREFIX:-nph_}
libvirt_name=${prefix}nova_libvirt
compute_name=${prefix}nova_compute
agent_name=${prefix}pinning_agent
isolate_name=${prefix}pinning_isolate

if [ "$cmd" = stop ] && [ "${1:-}" = compute ]; then
    # nova-compute alone (its restart): the guests and libvirtd stay.
    podman rm -f -t 5 "$compute_name" >/dev/null 2>&1 || true
    exit 0
fi
if [ "$cmd" = stop ]; then
    # Guests outlive nova_libvirt in kolla (libvirt moves each qemu to
    # its own cgroup): destroy them first, so none is left behind.
    if podman container exists "$libvirt_name" 2>/dev/null; then
        for dom in $(timeout 10 virsh -q -c "$uri" list --name 2>/dev/null); do
            timeout 10 virsh -q -c "$uri" destroy "$dom" >/dev/null 2>&1 || true
        done
    fi
    for name in "$isolate_name" "$agent_name" "$compute_name" "$libvirt_name"; do
        podman rm -f -t 5 "$name" >/dev/null 2>&1 || true
    done
    exit 0
fi

for want in "$@"; do
    case "$want" in
        compute|agent|isolate) ;;
        *) echo "kolla-compute.sh: unknown container $want (compute, agent or isolate)" >&2
           exit 2 ;;
    esac
done

images=$("$top/tools/kolla-images.sh" build)
libvirt_image=$(sed -n 's/^nova_libvirt=//p' <<<"$images")
compute_image=$(sed -n 's/^nova_compute=//p' <<<"$images")
runtime=$(sed -n 's/^runtime=//p' <<<"$images")
podman() { command podman --runtime "$runtime" "$@"; }

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# DIR/run stands for the host's /run; lib, qemu and nova for kolla's
# named volumes libvirtd, nova_libvirt_qemu and nova_compute; log for
# kolla_logs; config for kolla's config directory; state and etc for the
# package's state directory and configuration (deploy.rst).
mkdir -p "$dir"/{run/libvirt/qemu,run/lock,lib/qemu,qemu,nova,log,config,etc}
# The state directory as deploy.rst has operators make it: root's, with
# nova/ for the user nova-compute runs as: the image's nova (kolla's uid
# 42436), or NPH_KOLLA_NOVA_UID (the cloud's runs as root, and the
# package uses no directory another user can write).
nova_uid=${NPH_KOLLA_NOVA_UID:-42436}
install -d -m 0755 "$dir/state"
install -d -m 0755 -o "$nova_uid" -g "$nova_uid" "$dir/state/nova"
chown 42436:42436 "$dir/nova"

# kolla-ansible's libvirtd.conf and qemu.conf (ansible/roles/nova-cell/
# templates), without TLS or SASL; qemu's max_files/max_processes are
# left out: this sandbox refuses to raise a process's limits.
cat > "$dir/config/libvirtd.conf" <<EOF
listen_tcp = 1
listen_tls = 0
auth_tcp = "none"
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
mkdir -p "$dir/log/libvirt"
if [ ! -f "$dir/etc/nova-pinning-hooks.conf" ]; then
    # The agents reach libvirt through its socket under /run (deploy.rst
    # runs them with --network none).
    printf '[nova_pinning]\nconnection_uri = qemu:///system\n' \
        > "$dir/etc/nova-pinning-hooks.conf"
fi

# kolla mounts the host's /lib/modules read-only (for modprobe); this
# sandbox has none, and a mount of a missing path fails the start.
modules=()
[ -d /lib/modules ] && modules=(-v /lib/modules:/lib/modules:ro)

# The package's state directory and configuration, as deploy.rst adds
# them through nova_compute_extra_volumes.
extra=(-v "$dir/state:/var/lib/nova-pinning-hooks"
       -v "$dir/etc:/etc/nova-pinning-hooks:ro")
conf=/etc/nova-pinning-hooks/nova-pinning-hooks.conf
isolate_conf=/etc/nova-pinning-hooks/${NPH_KOLLA_ISOLATE_CONF:-nova-pinning-hooks.conf}
# deploy.rst's isolation agent container: privileged, host PID and cgroup
# namespaces, no network, the cgroup tree, /run (here DIR/run) and the
# host's system bus.
isolate_opts=(--privileged --pid host --cgroupns host --network none
              -v /sys/fs/cgroup:/sys/fs/cgroup
              -v "$dir/run:/run"
              -v /run/dbus:/run/dbus
              "${extra[@]}"
              --user root)

if [ "$cmd" = undo ]; then
    podman stop -t 10 "$isolate_name" >/dev/null 2>&1 || true
    podman rm -f "$isolate_name" >/dev/null 2>&1 || true
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
    podman rm -f "$libvirt_name" >/dev/null 2>&1 || true
    # shellcheck disable=SC2086
    podman run -d --name "$libvirt_name" ${NPH_KOLLA_LIBVIRT_OPTS:-} \
        --privileged --pid host --cgroupns host --network host \
        -v "$dir/config/libvirtd.conf:/etc/libvirt/libvirtd.conf:ro" \
        -v "$dir/config/qemu.conf:/etc/libvirt/qemu.conf:ro" \
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
# libvirtd answers within a second or two of its start.
if ! timeout 30 bash -c 'until virsh -q -c "$1" version >/dev/null 2>&1; do
                             sleep 0.2; done' answer "$uri"; then
    echo "kolla-compute.sh: $libvirt_name does not answer on $uri" >&2
    podman logs --tail 20 "$libvirt_name" >&2 || true
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
        podman rm -f "$compute_name" >/dev/null 2>&1 || true
        # shellcheck disable=SC2086
        podman run -d --name "$compute_name" ${NPH_KOLLA_COMPUTE_OPTS:-} \
            --privileged --ipc host --network host \
            -e LIBGUESTFS_BACKEND=direct \
            "${modules[@]}" \
            -v "$dir/run:/run" \
            -v /dev:/dev \
            -v "$dir/log:/var/log/kolla" \
            -v "$dir/lib:/var/lib/libvirt" \
            -v "$dir/nova:/var/lib/nova" \
            "${extra[@]}" \
            "$compute_image" ${NPH_KOLLA_COMPUTE_COMMAND:-sleep infinity} >/dev/null
        ;;
    agent)
        # deploy.rst's binding agent container: privileged, host PID
        # namespace, no network; /run for libvirt's socket and pid files.
        running "$agent_name" && continue
        podman rm -f "$agent_name" >/dev/null 2>&1 || true
        podman run -d --name "$agent_name" \
            --privileged --pid host --network none \
            -v "$dir/run:/run" \
            "${extra[@]}" \
            --user root "$compute_image" \
            /var/lib/kolla/venv/bin/nova-pinning --config-file "$conf" agent \
            >/dev/null
        ;;
    isolate)
        running "$isolate_name" && continue
        podman rm -f "$isolate_name" >/dev/null 2>&1 || true
        podman run -d --name "$isolate_name" "${isolate_opts[@]}" \
            "$compute_image" \
            /var/lib/kolla/venv/bin/nova-pinning-isolate --config-file "$isolate_conf" watch \
            >/dev/null
        ;;
    esac
done
echo "$uri"
