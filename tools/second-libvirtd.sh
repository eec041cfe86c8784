#!/bin/bash
# A second libvirtd on this machine, for live migration tests: its own
# mount namespace with its own /run, /var/lib/libvirt, /var/cache/libvirt,
# /var/log/libvirt and /etc/libvirt (so its own virtlogd, pid files,
# sockets, domains and host UUID: the first daemon's configuration is
# copied, none of its domains, networks or pools), listening on 127.0.0.1
# only (TCP, no authentication: loopback, tests only), and seeing as its
# cpuset hierarchy a group that holds CPU 0 only: guests it starts cannot
# use CPU 1, like a destination host that lacks a CPU or keeps it reserved.
# On a host with no cgroup v1 cpuset (cgroup v2 under systemd: the VM of
# tests/vm/test_arrivals.py) there is no such group: the daemon sees the
# system bus and systemd's /run/systemd, so it asks machined for its
# guests' scopes as the first daemon does (on its own it would make their
# cgroups under its own, a v2 group with processes, which cannot hold
# controlled children).
#
#   tools/second-libvirtd.sh start DIR [PORT]   # prints its URI
#   tools/second-libvirtd.sh stop DIR
set -euo pipefail
cmd=${1:?start or stop}; dir=${2:?a directory}; port=${3:-16510}
cg=/sys/fs/cgroup/cpuset/nph-second-libvirtd

# Whether any of the daemons still runs (a zombie has ended).
alive() {
    local name pid state
    for name in libvirtd virtlogd; do
        pid=$(cat "$dir/run/$name.pid" 2>/dev/null || true)  # none: not running
        [ -n "$pid" ] || continue
        state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $1}')
        [ -n "$state" ] && [ "$state" != Z ] && return 0
    done
    return 1
}

# Until both daemons have ended (the next start takes their pid files
# and port): TERM, 30 s, then KILL; bounds for a loaded host.
stop() {
    local signal deadline
    for signal in TERM KILL; do
        for name in libvirtd virtlogd; do
            pid=$(cat "$dir/run/$name.pid" 2>/dev/null || true)  # none: not running
            [ -n "$pid" ] && kill "-$signal" "$pid" 2>/dev/null || true  # not running, or ended
        done
        deadline=$(( $(date +%s) + 30 ))
        while alive && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
        alive || break
    done
    if alive; then
        echo "second-libvirtd.sh: its daemons in $dir outlived SIGKILL" >&2
        exit 1
    fi
    # Empty groups go bottom-up.
    if [ -d "$cg" ]; then
        find "$cg" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null || true  # a group still in use stays
        rmdir "$cg" 2>/dev/null || true  # likewise
    fi
}

if [ "$cmd" = stop ]; then
    stop
    exit 0
fi

rm -rf "$dir"
mkdir -p "$dir"/{run,lib,cache,log,etc}
# The first daemon's configuration, but none of its objects: its
# persistent domains (a nova-compute here would see another host's
# guests and refuse to start: "My hypervisor has existing instances"),
# their autostart links, its networks (an autostarted one would clash
# with the first's bridge) and its storage pools.
cp -a /etc/libvirt/. "$dir/etc/"
if [ -d "$dir/etc/qemu" ]; then
    find "$dir/etc/qemu" -maxdepth 1 -name '*.xml' -delete
fi
rm -rf "$dir/etc/qemu/autostart" "$dir/etc/qemu/networks" "$dir/etc/storage"
cat > "$dir/etc/libvirtd.conf" <<CONF
host_uuid = "6a8b1c2d-0000-4000-8000-00000000d2d2"
listen_tls = 0
listen_tcp = 1
tcp_port = "$port"
listen_addr = "127.0.0.1"
auth_tcp = "none"
CONF
cat > "$dir/etc/qemu.conf" <<CONF
migration_port_min = 49300
migration_port_max = 49399
CONF
if [ -d /sys/fs/cgroup/cpuset ]; then
    mkdir -p "$cg"
    echo 0 > "$cg/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems > "$cg/cpuset.mems"
else
    cg=
fi
# Started with no inherited descriptor (a test runner's lock stays its).
# shellcheck disable=SC2016  # the inner bash expands them
unshare -m --propagation private bash -c '
    set -e
    dir=$1; cg=$2
    if [ -n "$cg" ]; then
        echo $$ > "$cg/cgroup.procs"
        mount --bind "$cg" /sys/fs/cgroup/cpuset
        mount --bind "$dir/run" /run
    else
        # The bus and the directory of systemd inside its own /run (bound
        # before that /run hides them; --rbind takes them along).
        mkdir -p "$dir/run/dbus" "$dir/run/systemd"
        mount --bind /run/dbus "$dir/run/dbus"
        mount --bind /run/systemd "$dir/run/systemd"
        mount --rbind "$dir/run" /run
    fi
    mount --bind "$dir/lib" /var/lib/libvirt
    mount --bind "$dir/cache" /var/cache/libvirt
    mount --bind "$dir/log" /var/log/libvirt
    mount --bind "$dir/etc" /etc/libvirt
    mkdir -p /run/libvirt/qemu /run/lock /var/lib/libvirt/qemu \
             /var/cache/libvirt/qemu /var/log/libvirt/qemu
    start() {
        python3 -c "import os, sys; os.closerange(3, 65536); os.execvp(sys.argv[1], sys.argv[1:])" "$@"
    }
    start virtlogd -d
    start libvirtd -d --listen -f /etc/libvirt/libvirtd.conf
' second-libvirtd "$dir" "$cg"
uri="qemu+tcp://127.0.0.1:$port/system"
# A second or two on a quiet host; the bounds are a loaded host's.
deadline=$(( $(date +%s) + 120 ))
until timeout 30 virsh -q -c "$uri" version >/dev/null 2>&1 \
        || [ "$(date +%s)" -ge "$deadline" ]; do
    sleep 0.2
done
if ! timeout 30 virsh -q -c "$uri" version >/dev/null 2>&1; then
    echo "second-libvirtd.sh: no answer on $uri" >&2
    stop
    exit 1
fi
echo "$uri"
