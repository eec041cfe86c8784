#!/bin/bash
# Prepare this machine (Debian 12, root) for the demo and the functional
# tests: Debian packages, the libvirt-qemu user, virtlogd and libvirtd.
# Idempotent: run it as often as you like; it (re)starts the daemons only
# when they are not answering. These machines have no systemd, so the
# daemons are started by hand.
#
#   tools/setup-host.sh                 # packages + daemons
#   tools/setup-host.sh --packages-only # packages only (lint/unit tests)
#
# It writes the guest type that works here (kvm, or qemu when /dev/kvm
# cannot run a guest) to /run/nova-pinning-hooks/virt-type.
set -euo pipefail

packages=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
          libvirt-dev qemu-system-x86 pkg-config python3-venv python3-dev
          gcc git tmux
          # isolation under a real systemd: a Debian root file system
          # booted with systemd-nspawn (tools/systemd-rootfs.sh)
          debootstrap systemd-container
          # the VM tests' 2-node host image (tools/vm-image.sh): overlays
          # and its ext4 file systems
          qemu-utils e2fsprogs
          # the real Prometheus of the functional tests, and promtool
          prometheus prometheus-node-exporter
          # the distribution-package steps of doc/source/reference/deployments.rst
          # (tests/functional/test_deploy.py): Debian's own nova
          python3-nova python3-libvirt python3-pip
          # kolla's containers (tests/functional/test_kolla_layout.py):
          # Debian's podman, and runc where crun refuses the host's
          # hybrid cgroups (tools/kolla-images.sh)
          podman runc
          # private system buses, Debian's two, for the forged-reply
          # attack on the isolation agent's D-Bus path
          # (tests/functional/isolation/test_forged_replies.py): these
          # machines run no systemd, so dbus-broker only adds its files
          dbus dbus-broker)
# More, for a caller that needs them too (tools/cloud.sh).
read -r -a extra <<< "${NPH_EXTRA_PACKAGES:-}"
packages+=("${extra[@]}")
uri=qemu:///system
state=/run/nova-pinning-hooks

log() { echo "setup-host: $*"; }

if [ "$(id -u)" != 0 ]; then
    echo "setup-host.sh: run me as root" >&2
    exit 2
fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" \
        || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    # What Debian's mirror serves differs from day to day: a failure here
    # says so in one line (apt's own words above it), not as a test error.
    apt-get update -qq || {
        echo "setup-host.sh: apt-get update failed (Debian's mirror; apt says why above)" >&2
        exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null || {
        echo "setup-host.sh: Debian's mirror did not install: ${missing[*]} (apt says why above)" >&2
        exit 1; }
fi
[ "${1:-}" = "--packages-only" ] && exit 0

getent group kvm >/dev/null || groupadd -r kvm
getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
id libvirt-qemu >/dev/null 2>&1 || \
    useradd -r -g libvirt-qemu -G kvm -d /var/lib/libvirt -s /usr/sbin/nologin \
        libvirt-qemu
[ -e /dev/kvm ] && chgrp kvm /dev/kvm && chmod 660 /dev/kvm
mkdir -p /var/log/libvirt/qemu /var/run/libvirt /var/lib/libvirt/qemu \
         /var/cache/libvirt/qemu "$state"

# Daemons must not inherit our descriptors: a lock held by whoever runs
# this script (flock around a test run) would otherwise stay held by
# libvirtd for as long as it runs.
daemon() {
    python3 -c 'import os, sys; os.closerange(3, 65536); os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

answering() {
    timeout 10 virsh -q -c "$uri" version >/dev/null 2>&1
}

# This machine's virtlogd, by its pid file and its socket: the cloud's
# (tools/cloud.sh, kolla's nova_libvirt) run in other mount namespaces,
# and "pgrep -x virtlogd" found those while this one was dead (its socket
# refused connections and every functional test's guest failed to start).
virtlogd_ours() {
    local pid
    pid=$(cat /run/virtlogd.pid 2>/dev/null || true)  # none: not running
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = virtlogd ] &&
        timeout 5 python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(4)
s.connect(sys.argv[1])' /run/libvirt/virtlogd-sock 2>/dev/null
}
if ! virtlogd_ours; then
    log "starting virtlogd"
    rm -f /run/virtlogd.pid
    daemon virtlogd -d
fi
if ! answering; then
    # This machine's daemon only, by its pid file: other libvirtds (the
    # cloud's of tools/cloud.sh, a test's second daemon) are not ours.
    pid=$(cat /run/libvirtd.pid 2>/dev/null || true)  # none: not running
    if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = libvirtd ]; then
        log "libvirtd does not answer: restarting it"
        kill "$pid" 2>/dev/null || true  # it ended
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$pid" 2>/dev/null || true  # it ended
    fi
    rm -f /var/run/libvirtd.pid
    log "starting libvirtd"
    daemon libvirtd -d
    for _ in $(seq 100); do answering && break; sleep 0.3; done
    if ! answering; then
        echo "setup-host.sh: libvirtd did not answer on $uri within 30 s" >&2
        exit 1
    fi
fi

# Does KVM really run a guest here? A nested /dev/kvm can exist and fail.
if [ ! -s "$state/virt-type" ]; then
    virt_type=qemu
    if [ -r /dev/kvm ]; then
        probe=$(mktemp /tmp/nph-probe.XXXXXX.xml)
        cat > "$probe" <<'XML'
<domain type='kvm'><name>nph-kvm-probe</name><memory unit='MiB'>16</memory>
<vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices></domain>
XML
        virsh -q -c "$uri" destroy nph-kvm-probe >/dev/null 2>&1 || true  # none left
        if timeout 60 virsh -q -c "$uri" create "$probe" >/dev/null 2>&1; then
            virt_type=kvm
            virsh -q -c "$uri" destroy nph-kvm-probe >/dev/null 2>&1 || true  # it ended
        fi
        rm -f "$probe"
    fi
    echo "$virt_type" > "$state/virt-type"
fi
log "libvirtd answers on $uri; guests run as type '$(cat "$state/virt-type")'"
