#!/bin/bash
# A Debian 13 (trixie) root file system for the package's tests on
# Debian 13's own Python 3.13 (the py313 and nova-functional-N-py313
# stages of tools/run-tests.sh), and the way into it:
#
#   tools/trixie-root.sh                # builds it once; prints the directory
#   tools/trixie-root.sh run CMD...     # CMD inside it, in this checkout
#
# Built once with debootstrap from the mirror apt uses on this machine and
# kept under /var/cache/nova-pinning-hooks, one directory per version of
# this script (rebuilt when it changes; checkouts of other versions keep
# theirs). It holds Python 3.13 with venv, what builds the wheels that
# have none for it (libvirt-python against Debian 13's libvirt-dev, gcc,
# python3-dev), git (pbr reads the checkout's history), Debian 13's
# promtool (package prometheus: the unit tests check the shipped rules
# with it), procps (nova's libvirt driver runs uptime) and tox in
# /opt/nph-tox.
#
# `run` starts CMD with systemd-nspawn (a container, not a boot): its own
# /proc, /dev and /dev/shm (never the host's /dev: ENVIRONMENT, a
# package's postinst once changed the host's /dev/kvm), the host's
# network (pip reaches PyPI), the kept root read-only under a throwaway
# tmpfs overlay (nothing a run writes outside the checkout stays), this
# checkout bind-mounted at its own path (tox.ini's paths hold) and
# pip's cache of this machine (wheels built for 3.13 are kept between
# runs), and this machine's CA bundle for pip (as kolla-images.sh does).
# NPH_* and HYPOTHESIS_PROFILE are handed in. Bounded: CMD is
# killed after NPH_TRIXIE_TIMEOUT seconds (default 3600).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
# shellcheck source=tools/lib/common.sh
. tools/lib/common.sh

stamp=$(sha256sum "$0" | cut -c1-16)
dest=${NPH_TRIXIE_ROOT:-/var/cache/nova-pinning-hooks/root-trixie-$stamp}
complete() { [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$stamp" ]; }

build() {
    complete && return 0
    need_root
    local tool
    for tool in debootstrap systemd-nspawn; do
        command -v "$tool" >/dev/null ||
            die "$tool is missing (tools/setup-host.sh installs it)"
    done
    local mirror
    mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' \
                 /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" {print $2; exit}' \
                                     /etc/apt/sources.list 2>/dev/null)
    mirror=${mirror:-http://deb.debian.org/debian}
    # One build at a time: a second run waits, then finds it made.
    mkdir -p "$(dirname "$dest")"
    exec 9>"$dest.lock"
    flock -w 1800 9 || die "$dest.lock is held"
    complete && { exec 9>&-; return 0; }
    local work="$dest.tmp"
    rm -rf "$work"
    mkdir -p "$work"
    log "debootstrap trixie into $work/root"
    # debootstrap runs the packages' maintainer scripts in the new root
    # with its own /proc; it never mounts the host's /dev there.
    timeout 1800 debootstrap --variant=minbase \
        --include=python3,python3-venv,python3-dev,gcc,pkg-config,libvirt-dev,git,ca-certificates,prometheus,procps \
        trixie "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
        tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    log "tox in /opt/nph-tox"
    # Inside the new root (its Python), through the container below.
    NPH_TRIXIE_ROOT_DIR="$work/root" enter 900 /bin/sh -c \
        'python3 -m venv /opt/nph-tox &&
         /opt/nph-tox/bin/pip install -q --upgrade pip &&
         /opt/nph-tox/bin/pip install -q "tox>=4,<5"' || die "installing tox failed"
    rm -rf "$work/root/var/cache/apt/archives/"*.deb
    echo "$stamp" > "$work/root/.complete"
    mv "$work/root" "$work/new"
    rm -rf "$dest"
    mv "$work/new" "$dest"
    rm -rf "$work"
    exec 9>&-
}

enter() {  # SECONDS CMD...: CMD in the root, in this checkout
    local seconds=$1 root=${NPH_TRIXIE_ROOT_DIR:-$dest}
    shift
    local pipcache=${PIP_CACHE_DIR:-/root/.cache/pip}
    mkdir -p "$pipcache"
    local args=(-q -D "$root" --register=no --keep-unit --console=pipe
                --bind="$top:$top" --bind="$pipcache:/root/.cache/pip"
                --chdir="$top" --setenv=HOME=/root -M "nph-trixie-$$"
                # This machine's CA bundle, as kolla-images.sh hands it
                # in: PyPI may be reached through a TLS proxy of its own.
                --bind-ro=/etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt
                --setenv=PIP_CERT=/run/host-ca.crt
                --setenv=PATH=/opt/nph-tox/bin:/usr/local/bin:/usr/bin:/bin)
    # The kept root stays as built: a run writes to a tmpfs over it.
    [ -z "${NPH_TRIXIE_ROOT_DIR:-}" ] && args+=(--volatile=overlay)
    # A worktree's .git names the repository's own directory: there too.
    local gitdir
    gitdir=$(git rev-parse --git-common-dir 2>/dev/null || true)  # no git: pbr does without
    if [ -n "$gitdir" ]; then
        gitdir=$(cd "$gitdir" && pwd)
        case "$gitdir/" in "$top"/*) ;; *) args+=(--bind-ro="$gitdir:$gitdir") ;; esac
    fi
    local v
    while IFS='=' read -r v _; do
        args+=(--setenv="$v=${!v}")
    done < <(env | grep -E '^(NPH_[A-Z0-9_]*|HYPOTHESIS_PROFILE)=' || true)  # none set
    timeout -k 30 "$seconds" \
        systemd-nspawn "${args[@]}" -- "$@"
}

case "${1:-}" in
    '') build; echo "$dest" ;;
    run)
        shift
        [ $# -gt 0 ] || die "run what?"
        build
        enter "${NPH_TRIXIE_TIMEOUT:-3600}" "$@" ;;
    *) die "usage: trixie-root.sh [run CMD...]" ;;
esac
