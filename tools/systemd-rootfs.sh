#!/bin/bash
# A Debian 12 root file system with systemd, python3 and oslo.config /
# oslo.log from Debian's packages, for booting a real systemd with
# systemd-nspawn in the isolation tests (tests/functional/isolation/
# test_real_systemd.py). Built once and kept:
#
#   tools/systemd-rootfs.sh            # prints the directory
#
# The mirror is the one apt uses on this machine.
set -euo pipefail

dest=${NPH_SYSTEMD_ROOTFS:-/var/cache/nova-pinning-hooks/rootfs-bookworm-systemd}
if [ -x "$dest/usr/lib/systemd/systemd" ] && [ -f "$dest/.complete" ]; then
    echo "$dest"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "systemd-rootfs.sh: run me as root" >&2
    exit 2
fi
# One build at a time (tools/run-tests.sh starts one beside the stages
# before the functional tests, which run this again): the second waits,
# then finds the first's.
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock -w 1800 9 || { echo "systemd-rootfs.sh: $dest.lock is held" >&2; exit 1; }
if [ -x "$dest/usr/lib/systemd/systemd" ] && [ -f "$dest/.complete" ]; then
    echo "$dest"
    exit 0
fi
mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' \
             /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" {print $2; exit}' \
                                 /etc/apt/sources.list 2>/dev/null)
mirror=${mirror:-http://deb.debian.org/debian}

rm -rf "$dest.tmp"
debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,python3,python3-oslo.config,python3-oslo.log,procps \
    bookworm "$dest.tmp" "$mirror" >&2
touch "$dest.tmp/.complete"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$dest"
