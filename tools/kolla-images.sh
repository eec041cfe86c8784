#!/bin/bash
# kolla's images for a compute host, built with Debian's podman from a
# Debian 12 debootstrap tree, following openstack/kolla's Dockerfiles
# (kolla/docker/base, openstack-base, nova/nova-base, nova/nova-compute,
# nova/nova-libvirt; read at openstack/kolla 5d77668, master of
# 2026-07-23). No registry is reachable here, so kolla's own base image
# (debian:bookworm) is made with debootstrap and `podman import`.
#
#   tools/kolla-images.sh build
#       # prints runtime=OCI-RUNTIME, containers_conf=PATH (for podman
#       # run: CONTAINERS_CONF, empty where none is needed, below),
#       # nova_libvirt=IMAGE, nova_compute=IMAGE,
#       # nova_compute_kolla=IMAGE (kolla's, without the package) and
#       # nova_compute_derived=IMAGE (reference/deployments.rst's derived image from it)
#
# Built once and kept: each image's tag is a key of its inputs (this
# script, the series' constraints, the package's sources), so a second
# run finds them and prints their names in seconds; a change of the
# package rebuilds only the last layer (its wheel into kolla's venv).
# Stamps and pip's cache live under /var/cache/nova-pinning-hooks/kolla.
#
# What follows kolla, and what differs, is listed in doc/source/reference/deployments.rst
# ("kolla's images, as built here").
set -euo pipefail
# A stage that fails inside $(...) stops the build.
shopt -s inherit_errexit
top=$(cd "$(dirname "$0")/.." && pwd)
# Its stdout is for the images' names (below): it logs on stderr.
log_tag=kolla-images log_fd=2
# shellcheck source=tools/lib/common.sh
. "$top/tools/lib/common.sh"

cmd=${1:-}
if [ "$cmd" != build ]; then
    echo "usage: tools/kolla-images.sh build" >&2
    exit 2
fi
need_root

# qemu runs as nova inside nova_libvirt (kolla-ansible's qemu.conf:
# user = "nova") and opens the host's /dev/kvm, which belongs to the
# host's kvm group: the image's kvm group gets the host's gid, so that
# the gid is part of the base image's key. Without /dev/kvm there is no
# such gid (and no KVM guest to run): said in one line, before anything
# is built. A /dev/kvm of group 0 that everyone may open needs no group.
kvm=/dev/kvm
if [ ! -c "$kvm" ]; then
    die "$kvm is missing (or not a character device): nova_libvirt runs KVM guests as nova through the host's kvm group (load kvm_intel or kvm_amd, or build on a host with KVM)"
fi
kvm_gid=$(stat -c %g "$kvm")
if [ "$kvm_gid" = 0 ]; then
    if [ "$(( 0$(stat -c %a "$kvm") & 6 ))" != 6 ]; then
        die "$kvm belongs to group 0 and only root may open it: qemu runs as nova in nova_libvirt; give it a kvm group (udev) or mode 0666"
    fi
    kvm_group=''
else
    # Lines of the base image's RUN below.
    kvm_group="    && (getent group kvm >/dev/null && groupmod -g $kvm_gid kvm \\
        || groupadd -g $kvm_gid kvm) \\
    && usermod --append --groups kvm nova \\
"
fi

cache=${NPH_KOLLA_CACHE:-/var/cache/nova-pinning-hooks/kolla}
# shellcheck source=tools/nova-releases.sh
. "$top/tools/nova-releases.sh"  # kolla's nova: the list's kolla line
kolla_series=$(nova_with kolla)
constraints=$top/tools/constraints/nova-$kolla_series.txt
nova_version=$(nova_pypi_version "$kolla_series")

if ! command -v podman >/dev/null; then
    log "installing Debian's podman"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        podman >&2
fi
for tool in podman debootstrap; do
    if ! command -v "$tool" >/dev/null; then
        die "$tool is missing (apt-get install $tool)"
    fi
done

# podman (4.3) starts every container with RLIMIT_NOFILE 1048576 and
# RLIMIT_NPROC 4194304 unless told otherwise, and a host that refuses to
# raise its limits that far (this sandbox: root without CAP_SYS_RESOURCE)
# refuses every `podman run` and `podman build` ("error setting rlimit
# type 7: operation not permitted"). There, and only there, this
# script's and kolla-compute.sh's podman commands read a containers.conf
# of their own, [containers] default_ulimits = [] (the containers keep
# podman's own limits), through CONTAINERS_CONF: nothing of the host's
# podman configuration changes, for no other user and not for later
# (podman 4.3 has no CONTAINERS_CONF_OVERRIDE, and CONTAINERS_CONF
# replaces the system's containers.conf files for these commands only;
# Debian's /usr/share/containers/containers.conf sets nothing but
# defaults). A CONTAINERS_CONF of the caller's is kept. `podman exec`
# needs none of it: an exec takes the container's own limits.
containers_conf=${CONTAINERS_CONF:-}
if [ -z "$containers_conf" ] && ! (ulimit -Hn 1048576 && ulimit -Hu 4194304) 2>/dev/null; then
    containers_conf=$cache/containers.conf
    mkdir -p "$cache"
    printf '# tools/kolla-images.sh: podman'"'"'s default ulimits cannot be raised here\n[containers]\ndefault_ulimits = []\n' \
        > "$containers_conf.tmp.$$"  # this run's: two runs at once each rename their own
    chmod 0644 "$containers_conf.tmp.$$"
    mv "$containers_conf.tmp.$$" "$containers_conf"
fi
if [ -n "$containers_conf" ]; then
    export CONTAINERS_CONF=$containers_conf
fi

# crun refuses a cgroup v1 host whose cgroup2 hierarchy holds a
# controller ("cgroups in hybrid mode not supported": seen here with
# hugetlb left on cgroup2); runc runs there.
runtime=crun
if [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null)" ]; then
    runtime=runc
    if ! command -v runc >/dev/null; then
        log "installing Debian's runc (crun refuses this hybrid cgroup host)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y \
            --no-install-recommends runc >&2
    fi
fi

mirror=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' \
             /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" {print $2; exit}' \
                                 /etc/apt/sources.list 2>/dev/null)
mirror=${mirror:-http://deb.debian.org/debian}

mkdir -p "$cache/pip"
exec 9>"$cache/build.lock"
flock -w 3600 9 || { echo "kolla-images.sh: $cache/build.lock is held" >&2; exit 1; }

key() { sha256sum | cut -c1-16; }
have() { podman image exists "$1"; }
ctx=$cache/context
rm -rf "$ctx"
mkdir -p "$ctx"
trap 'rm -rf "$ctx"' EXIT
# One image a stage, tagged with a key of the stage's inputs (its parent's
# tag, its Containerfile, the files it copies): a change rebuilds that
# stage and those after it, nothing before. Builds reach Debian's mirror
# and PyPI from the host's network; pip's cache is a mount of this
# machine's (kolla passes --no-cache-dir: nothing of it stays in the
# image either way).
stage() {
    local name=$1 tag
    shift
    tag=nph/$name:$( (cat "$ctx/Containerfile"; cat "$@" /dev/null) | key)
    if ! have "$tag"; then
        log "building $tag"
        podman --runtime "$runtime" build --network host --layers=false \
            -v "$cache/pip:/root/.cache/pip" \
            -v /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro \
            -t "$tag" "$ctx" >&2
    fi
    echo "$tag"
}

# -- kolla's base image (debian:bookworm), from debootstrap ----------------
# kolla's base_apt_packages that a compute host's images use: dumb-init
# (the entrypoint), sudo, ca-certificates, procps; python3 for the venv.
include=ca-certificates,dumb-init,sudo,procps,python3
rootfs=nph/debian-bookworm:$(echo "minbase $include $mirror" | key)
if ! have "$rootfs"; then
    log "debootstrap bookworm from $mirror"
    tree=$cache/rootfs.tmp
    rm -rf "$tree"
    debootstrap --variant=minbase --include="$include" \
        bookworm "$tree" "$mirror" >&2
    rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/*
    tar -C "$tree" -c . | podman import - "$rootfs" >&2
    rm -rf "$tree"
fi

# -- base: kolla/docker/base (debian) --------------------------------------
# kolla creates every user up front with fixed ids (kolla/common/users.py):
# kolla 42400, nova 42436, qemu 42427; nova gets the groups kolla and qemu
# (configure_user in nova-base and nova-libvirt), home /var/lib/nova.
cat > "$ctx/Containerfile" <<EOF
FROM $rootfs
LABEL name="base" nph.kolla="docker/base"
ENV LANG=C.UTF-8 KOLLA_BASE_DISTRO=debian DEBIAN_FRONTEND=noninteractive
RUN groupadd --gid 42400 kolla \\
    && useradd -l -M --shell /usr/sbin/nologin --uid 42400 --gid 42400 kolla \\
    && groupadd --gid 42436 nova \\
    && useradd -l -M --shell /usr/sbin/nologin --uid 42436 --gid 42436 nova \\
    && groupadd --gid 42427 qemu \\
    && useradd -l -M --shell /usr/sbin/nologin --uid 42427 --gid 42427 qemu \\
${kvm_group}    && usermod --append --home /var/lib/nova --groups kolla,qemu nova \\
    && mkdir -p /var/lib/nova /var/log/kolla \\
    && chown 42436:42436 /var/lib/nova \\
    && chown :kolla /var/log/kolla && chmod 2775 /var/log/kolla
ENTRYPOINT ["dumb-init", "--single-child", "--"]
EOF
base=$(stage base)

# -- nova-libvirt: kolla/docker/nova/nova-libvirt ---------------------------
# kolla's Debian list, less what this host's tests do not use (ceph,
# openvswitch, swtpm, spice, OVMF, pm-utils, mdevctl):
# libvirt-daemon-system, libvirt-clients, qemu, virtlogd, and Cyrus
# SASL's plugins and saslpasswd2 (kolla-ansible's libvirt_enable_sasl,
# its default: libvirtd's TCP socket asks for a user and password,
# tools/kolla-compute.sh). Its start
# script as kolla's kolla_nova_libvirt_start.sh: virtlogd beside
# libvirtd --listen, libvirtd the container's main process.
cat > "$ctx/Containerfile" <<EOF
FROM $base
LABEL name="nova-libvirt" nph.kolla="docker/nova/nova-libvirt"
RUN apt-get update \\
    && apt-get install -y --no-install-recommends libvirt-daemon-system \\
        libvirt-clients libvirt-daemon-driver-qemu qemu-system-x86 \\
        qemu-utils iproute2 libsasl2-modules sasl2-bin \\
    && rm -rf /var/lib/apt/lists/* \\
    && rm -f /etc/libvirt/qemu/networks/default.xml \\
        /etc/libvirt/qemu/networks/autostart/default.xml
RUN printf '%s\\n' '#!/bin/bash' 'set -euo pipefail' '/usr/sbin/virtlogd &' \\
        'exec /usr/sbin/libvirtd --listen' \\
        > /usr/local/bin/kolla_nova_libvirt_start \\
    && chmod 744 /usr/local/bin/kolla_nova_libvirt_start
CMD ["/usr/local/bin/kolla_nova_libvirt_start"]
EOF
libvirt_image=$(stage nova-libvirt)

# -- openstack-base + nova-base: kolla's venv with nova --------------------
# openstack-base: /requirements/upper-constraints.txt without ovs,
# python3 -m venv --system-site-packages /var/lib/kolla/venv, the venv
# first on PATH, pip/wheel/setuptools upgraded with the constraints.
# nova-base (deb): Debian's python3-libvirt (the venv sees it through
# --system-site-packages: kolla installs no libvirt-python into the venv,
# nova does not require one), then nova with the constraints. kolla
# installs nova from its source tarball (/nova); here $nova_version from
# PyPI, the same release. nova-compute adds oslo-vmware. Of kolla's
# openstack_base_pip_packages (a long list every service image shares),
# only what nova-compute needs and nova does not require: pyroute2,
# which os-vif's ovs and linux_bridge plugins import (without it
# nova-compute logs an ERROR at start: "Could not load 'ovs'").
cp "$constraints" "$ctx/upper-constraints.txt"
cat > "$ctx/Containerfile" <<EOF
FROM $base
LABEL name="nova-base" nph.kolla="docker/openstack-base docker/nova/nova-base"
RUN apt-get update \\
    && apt-get install -y --no-install-recommends python3-venv \\
        python3-libvirt libsasl2-modules iproute2 openssh-client qemu-utils \\
    && rm -rf /var/lib/apt/lists/*
COPY upper-constraints.txt /requirements/upper-constraints.txt
RUN sed -e "/^ovs===/d" -i /requirements/upper-constraints.txt \\
    && mkdir -p /var/lib/kolla \\
    && python3 -m venv --system-site-packages /var/lib/kolla/venv
ENV PATH=/var/lib/kolla/venv/bin:\$PATH
RUN PIP_CERT=/run/host-ca.crt python3 -m pip install --upgrade \\
        -c /requirements/upper-constraints.txt pip wheel setuptools \\
    && PIP_CERT=/run/host-ca.crt python3 -m pip install --upgrade \\
        -c /requirements/upper-constraints.txt nova==$nova_version oslo-vmware pyroute2 \\
    && mkdir -p /etc/nova
EOF
nova_base=$(stage nova-base "$ctx/upper-constraints.txt")

# -- nova-compute: the package, as reference/deployments.rst's kolla-build override -------
# The package's sources as they are in this checkout (committed or not)
# key the wheel; it is built only when that image is missing. With
# NPH_KOLLA_WHEEL, that wheel instead (another release of the package:
# tests/day2's upgrade and rollback, as kolla-ansible upgrade rebuilds the
# image), keyed by its own bytes.
if [ -n "${NPH_KOLLA_WHEEL:-}" ]; then
    [ -f "$NPH_KOLLA_WHEEL" ] || die "NPH_KOLLA_WHEEL: no file $NPH_KOLLA_WHEEL"
    sha256sum "$NPH_KOLLA_WHEEL" | cut -d' ' -f1 > "$ctx/sources"
else
    (cd "$top" && git ls-files -z -- nova_pinning_hooks setup.cfg setup.py \
         pyproject.toml requirements.txt | xargs -0 sha256sum) > "$ctx/sources"
fi
# reference/deployments.rst's override puts this RUN in nova_compute_footer, just before
# kolla's final USER nova; the wheel stands in for
# 'nova-pinning-hooks==1.0.0' from an index.
cat > "$ctx/Containerfile" <<EOF
FROM $nova_base
LABEL name="nova-compute" nph.kolla="docker/nova/nova-compute"
COPY wheel /wheel
RUN PIP_CERT=/run/host-ca.crt /var/lib/kolla/venv/bin/pip install \\
        --no-cache-dir -c /requirements/upper-constraints.txt \\
        /wheel/nova_pinning_hooks-*.whl \\
    && rm -rf /wheel && rm -f /etc/machine-id
USER nova
EOF
wheel() {  # the package's wheel in $ctx/wheel, built once a run
    [ -d "$ctx/wheel" ] && return 0
    mkdir -p "$ctx/wheel"
    if [ -n "${NPH_KOLLA_WHEEL:-}" ]; then
        cp "$NPH_KOLLA_WHEEL" "$ctx/wheel/"
        return 0
    fi
    log "building the package's wheel"
    (cd "$top" && python3 -m pip wheel --no-deps -q -w "$ctx/wheel" . >&2)
}
compute=nph/nova-compute:$( (cat "$ctx/Containerfile" "$ctx/sources") | key)
if ! have "$compute"; then
    wheel
    compute=$(stage nova-compute "$ctx/sources")
fi

# -- reference/deployments.rst's other way: a derived image -------------------------------
# kolla's nova-compute as a registry serves it (here: nova-base and kolla's
# final USER nova, without the package), then reference/deployments.rst's Dockerfile
# ("A derived image") word for word, the wheel standing in for the index.
cat > "$ctx/Containerfile" <<EOF
FROM $nova_base
LABEL name="nova-compute-kolla" nph.kolla="docker/nova/nova-compute, no override"
USER nova
EOF
kolla_compute=$(stage nova-compute-kolla)
cat > "$ctx/Containerfile" <<EOF
FROM $kolla_compute
LABEL name="nova-compute-derived"
USER root
COPY wheel /wheel
RUN PIP_CERT=/run/host-ca.crt /var/lib/kolla/venv/bin/pip install \\
        --no-cache-dir -c /requirements/upper-constraints.txt \\
        /wheel/nova_pinning_hooks-*.whl \\
    && rm -rf /wheel
USER nova
EOF
derived=nph/nova-compute-derived:$( (cat "$ctx/Containerfile" "$ctx/sources") | key)
if ! have "$derived"; then
    wheel
    derived=$(stage nova-compute-derived "$ctx/sources")
fi

echo "runtime=$runtime"
# podman run and build need it here (above); empty where they do not.
echo "containers_conf=${containers_conf}"
echo "nova_libvirt=$libvirt_image"
echo "nova_compute=$compute"
echo "nova_compute_kolla=$kolla_compute"
echo "nova_compute_derived=$derived"
