#!/bin/bash
# A bootable Debian 13 (or 12) compute host image for the VM tests (tests/vm):
# Debian's cloud kernel, systemd as pid 1 on the unified cgroup v2
# hierarchy, libvirt-daemon-system with qemu, qemu-guest-agent (the
# tests drive the VM through it, never through the serial console),
# python3 and the package's dependencies from Debian's packages. The
# package itself is not in the image: the tests install it from the
# checkout at every boot (tests/vm/machine.py).
#
# Built once and kept; rebuilt when this script changes:
#
#   tools/vm-image.sh            # prints the image directory
#
# The directory holds disk.img (raw ext4, the root file system; the tests
# boot copy-on-write overlays of it, never the image itself), vmlinuz and
# initrd.img. The mirror is the one apt uses on this machine.
set -euo pipefail

# NPH_VM_SUITE: the Debian release, trixie (13, the default: kernel 6.12,
# systemd 257, libvirt 11.3, QEMU 10.0, today's platform; issue 62) or
# bookworm (12: kernel 6.1, systemd 252, libvirt 9.0, QEMU 7.2, which the
# host's functional tests cover).
suite=${NPH_VM_SUITE:-trixie}
case "$suite" in
    bookworm|trixie) ;;
    *) echo "vm-image.sh: NPH_VM_SUITE must be bookworm or trixie" >&2; exit 2 ;;
esac
stamp=$(sha256sum "$0" | cut -c1-16)
# One directory per version of this script: checkouts of different
# versions (branches, worktrees) sharing the cache never replace an image
# under each other's running VMs (a VM rebooted onto a base image other
# than the one its overlay was made on finds its file system corrupt).
dest=${NPH_VM_IMAGE_DIR:-/var/cache/nova-pinning-hooks/vm-$suite-$stamp}
if [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$stamp" ]; then
    echo "$dest"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "vm-image.sh: run me as root" >&2
    exit 2
fi
for tool in debootstrap mkfs.ext4 qemu-img; do
    if ! command -v "$tool" >/dev/null; then
        echo "vm-image.sh: $tool is missing (tools/setup-host.sh installs it)" >&2
        exit 2
    fi
done

mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' \
             /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" {print $2; exit}' \
                                 /etc/apt/sources.list 2>/dev/null)
mirror=${mirror:-http://deb.debian.org/debian}

# What a Debian compute node runs, minus nova: the guests' host side
# (libvirt, qemu, machined for libvirt's scopes), the tools the tests read
# the kernel with, and the package's Python dependencies.
packages=(
    linux-image-cloud-amd64 initramfs-tools udev kmod
    libvirt-daemon-system libvirt-clients libvirt-daemon-driver-qemu
    qemu-system-x86 qemu-guest-agent systemd-container
    python3 python3-libvirt python3-oslo.config python3-oslo.log
    python3-stevedore python3-pbr python3-prometheus-client python3-jeepney
    python3-pip python3-setuptools python3-wheel
    procps numactl e2fsprogs util-linux
    irqbalance dbus-broker
)

# One build at a time per image: a second run waits, then finds it made.
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock -w 1800 9 || { echo "vm-image.sh: $dest.lock is held" >&2; exit 1; }
if [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$stamp" ]; then
    echo "$dest"
    exit 0
fi
work="$dest.tmp"
root="$work/rootfs"
cleanup() {
    for m in proc sys dev/pts; do
        mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m" || true  # not mounted
    done
}
trap cleanup EXIT
cleanup
rm -rf "$work"
mkdir -p "$work"
log() { echo "vm-image: $*" >&2; }

log "debootstrap into $root"
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus \
    "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 20 "$work/debootstrap.log" >&2; exit 1; }

# apt in the chroot: /proc and /sys only. Never the host's /dev: a
# package's postinst would change the host's device nodes (the chroot's
# idea of the kvm group on the host's /dev/kvm).
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
# No daemon starts inside the chroot.
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
printf 'deb %s %s main\n' "$mirror" "$suite" > "$root/etc/apt/sources.list"
log "installing ${#packages[@]} packages"
chroot "$root" apt-get update -qq >"$work/apt.log" 2>&1
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq \
    --no-install-recommends "${packages[@]}" >>"$work/apt.log" 2>&1 || {
    tail -n 30 "$work/apt.log" >&2; exit 1; }
chroot "$root" apt-get clean
rm -f "$root/usr/sbin/policy-rc.d"

log "configuring"
echo nph-vm > "$root/etc/hostname"
printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n' > "$root/etc/fstab"
# A new machine id at every first boot of an overlay.
: > "$root/etc/machine-id"
chroot "$root" passwd -d root >/dev/null
# Nothing that competes with the tests for the VM's emulated CPUs, or
# waits for a network the VM does not have.
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
            fstrim.timer man-db.timer logrotate.timer \
            libvirt-guests.service systemd-timesyncd.service; do
    chroot "$root" systemctl mask "$unit" >/dev/null 2>&1 || true  # a unit the image lacks
done
rm -f "$root/etc/libvirt/qemu/networks/autostart/default.xml"
# irqbalance is installed as on a compute node but not started at boot:
# the interrupt tests (tests/vm/test_interrupts.py) start and stop it, so
# that they show both, and other tests see interrupts stay put.
chroot "$root" systemctl disable irqbalance.service >/dev/null 2>&1 || true  # not enabled
# dbus-broker (the system bus of Fedora, RHEL, CentOS Stream, Rocky and
# Alma, i.e. of kolla-ansible's other host distributions) is installed
# but not the system bus: Debian's package enables it at install time
# (dbus.service, an alias of dbus-broker.service), and Debian's
# default bus is dbus-daemon, which the other tests see.
# tests/vm/overdbus.py enables it and reboots, then disables
# it and reboots again.
chroot "$root" systemctl disable dbus-broker.service >/dev/null 2>&1 || true  # not enabled
chroot "$root" systemctl --global disable dbus-broker.service \
    >/dev/null 2>&1 || true  # not enabled; checked just below
if [ -e "$root/etc/systemd/system/dbus.service" ]; then
    echo "vm-image.sh: dbus.service is still an alias of dbus-broker" >&2
    exit 1
fi
# The guest agent is how the tests reach the VM (no network, no serial
# console once getty owns it).
chroot "$root" systemctl enable qemu-guest-agent.service >/dev/null 2>&1 || true  # if not, the tests say so

# shellcheck disable=SC2012  # Debian's kernel file names: no odd characters
kernel=$(ls "$root"/boot/vmlinuz-* | sort -V | tail -n 1)
# shellcheck disable=SC2012  # likewise
initrd=$(ls "$root"/boot/initrd.img-* | sort -V | tail -n 1)
cp "$kernel" "$work/vmlinuz"
cp "$initrd" "$work/initrd.img"
cleanup

log "making the ext4 image"
truncate -s 6G "$work/disk.img"
mkfs.ext4 -q -L nph-root -d "$root" "$work/disk.img"
rm -rf "$root"
echo "$stamp" > "$work/.complete"
rm -rf "$dest"
mv "$work" "$dest"
echo "$dest"
