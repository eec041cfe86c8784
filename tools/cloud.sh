#!/bin/bash
# A one-machine OpenStack cloud with the package inside two real
# nova-computes (the libvirt driver, real KVM guests), built the way
# DevStack builds one, from Debian's packages and PyPI only:
#
#   MariaDB and RabbitMQ (Debian, started by hand: no systemd needed);
#   keystone, placement, glance (file store), neutron-server (ML2, no
#   agents: nova needs a network API even for guests with no network)
#   and nova-api under uwsgi on 127.0.0.1; nova-conductor (one, for the
#   API and cell1: DevStack's "singleconductor") and nova-scheduler;
#   two compute hosts, nph-compute1 and nph-compute2, each its own
#   libvirtd and nova-compute in its own mount, UTS and cgroup namespace
#   (its own hostname, address on loopback (127.0.0.11, .12), /run,
#   /etc/libvirt, /var/lib/libvirt, cgroup subtree and instances
#   storage, and an sshd for nova's disk copies between hosts),
#   and the package pip-installed into nova's virtualenv from this
#   checkout and switched on as doc/source/admin/nova.rst tells operators
#   (``[oslo_messaging_notifications] driver = nova_pinning``).
#
#   tools/cloud.sh demo               # up, then boot three guests through
#                                     # the API and show their pins
#   tools/cloud.sh up [--series N] [--package on|off] [--compute2 host|kolla]
#                                     # N: a release of tools/nova-releases
#                                     # with cloud=, the newest by default
#                                     # --compute2 kolla: nph-compute2 in
#                                     # kolla-ansible's containers (below)
#   tools/cloud.sh package on|off     # switch it, restarting the computes
#   tools/cloud.sh package disabled   # [nova_pinning] enabled = false, the
#                                     # driver kept (admin/nova.rst, "Switch it off")
#   tools/cloud.sh weigher on|off     # nova-scheduler's OneToOneWeigher
#                                     # (follows "package on|off" too)
#   tools/cloud.sh restart-compute N [--kill]
#   tools/cloud.sh compute-series N S # compute N on nova series S (a
#                                     # rolling upgrade), S = the cloud's: back
#   tools/cloud.sh reboot-host N      # a power cut and a boot: the host's
#                                     # guests killed, its services again
#   tools/cloud.sh control stop|start rabbitmq|mariadb
#   tools/cloud.sh status
#   tools/cloud.sh down [--purge]     # --purge also drops the databases
#
# Built once and kept (cached on the machine): the virtualenv
# (/var/cache/nova-pinning-hooks/cloud), the databases, keystone's
# users and endpoints, the image and the flavors (/var/lib/nph-cloud). A
# second ``up`` only starts what is not running. It is a test cloud:
# every service listens on loopback only and its passwords are fixed.
# /etc/openstack/clouds.yaml gets the clouds ``nph`` (a member) and
# ``nph-admin`` (admin): ``openstack --os-cloud nph-admin server list``.
#
# --compute2 kolla (kept in the state directory, like the series; the
# series tools/nova-releases marks kolla only: kolla's image holds that
# nova): nph-compute2's libvirtd runs in
# the nova_libvirt container and its nova-compute (that nova from kolla's
# venv in the image, the package installed into it as reference/deployments.rst tells
# kolla operators) in nova_compute, in its own PID namespace, both
# started by tools/kolla-compute.sh with kolla-ansible's options (host
# network: its address 127.0.0.12 and libvirt's port 16522 as before).
# What differs from the host layout, and why, is in doc/source/reference/deployments.rst
# ("The cloud's nph-compute2 in kolla's containers").
#
# This file is the command: its options and subcommands. What each does
# is in tools/cloud/ (one part a concern, functions only; what it takes
# from tools/nova-releases in tools/cloud/releases.sh, one writer a
# service's configuration in tools/cloud/config/), and the helpers every tool
# shares (log, die, spawn, stop_proc, wait_http, try) in tools/lib/common.sh.
# shellcheck source-path=SCRIPTDIR/..
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tools/lib/common.sh"
. "$top/tools/cloud/releases.sh"
. "$top/tools/cloud/debian.sh"
. "$top/tools/cloud/venv.sh"
. "$top/tools/cloud/config/all.sh"
. "$top/tools/cloud/config/auth.sh"
. "$top/tools/cloud/config/keystone.sh"
. "$top/tools/cloud/config/placement.sh"
. "$top/tools/cloud/config/glance.sh"
. "$top/tools/cloud/config/neutron.sh"
. "$top/tools/cloud/config/nova.sh"
. "$top/tools/cloud/config/compute.sh"
. "$top/tools/cloud/config/package.sh"
. "$top/tools/cloud/databases.sh"
. "$top/tools/cloud/services.sh"
. "$top/tools/cloud/bootstrap.sh"
. "$top/tools/cloud/hosts.sh"
. "$top/tools/cloud/computes.sh"
. "$top/tools/cloud/kolla.sh"
. "$top/tools/cloud/commands.sh"

CACHE=${NPH_CLOUD_CACHE:-/var/cache/nova-pinning-hooks/cloud}
STATE=${NPH_CLOUD_STATE:-/var/lib/nph-cloud}
RUN=/run/nph-cloud
SOCK=/run/mysqld/nph-cloud.sock  # where the mysql user may create it
LOG=/var/log/nph-cloud
PASS=nph-cloud-secret  # loopback only
HOSTS=(nph-compute1 nph-compute2)
HOST_IPS=(127.0.0.11 127.0.0.12)  # each compute's my_ip, on loopback
LIBVIRT_PORTS=(16521 16522)
SSH_PORTS=(2211 2212)  # nova copies disks between hosts with ssh/scp
# Bounds, in seconds, for a loaded host (two busy CPUs beside the cloud),
# not a quiet one: a libvirtd's answer to "virsh version" (none within
# it: hung, restarted), a daemon's start until it answers, a
# nova-compute's start until it serves its RPC queue (after init_host).
VIRSH_PROBE=30
DAEMON_START=120
COMPUTE_START=360

compute2=  # host or kolla: --compute2, else what the state says, else host
started_computes=()  # the nova-computes this run started (wait_rpc_servers)
package=on
cmd=${1:-}
[ $# -gt 0 ] && shift
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --series) series=${2:?}; shift 2 ;;
        --package) package=${2:?}; shift 2 ;;
        --compute2) compute2=${2:?}; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done

need_root
check_series
case "$package" in on|off) ;; *) die "--package is on or off, not '$package'" ;; esac
case "$compute2" in ''|host|kolla) ;; *) die "--compute2 is host or kolla, not '$compute2'" ;; esac

[ -n "$compute2" ] || compute2=$(cat "$STATE/compute2-layout" 2>/dev/null || echo host)
if [ "$compute2" = kolla ]; then
    # nph-compute2's libvirtd (nova_libvirt) asks for SASL credentials on
    # its TCP socket: this script's virsh and libvirt clients read the
    # ones tools/kolla-compute.sh made (compute 1's libvirtd, with no
    # authentication, asks for none).
    export LIBVIRT_AUTH_FILE=$STATE/compute2/config/auth.conf
fi
venv=$CACHE/venv-$series
py=$venv/bin/python
etc=$STATE/etc
mkdir -p "$RUN" "$LOG"
chmod 0700 "$RUN"
# stevedore, every service's plugin loader, keeps the entry points it
# found in a file per interpreter and sys.path under
# $XDG_CACHE_HOME/python-entrypoints and trusts that file without
# looking again: one written from a partial view of venv-34 (1,361 of its
# 1,875 entry points, none of keystoneauth1's; its writer unknown) made
# every later nova-compute of that venv fail at its start ("The plugin
# password could not be found"), run after run. The cloud's processes
# keep no such file (stevedore's .disable): each reads the entry points
# itself, a fraction of a second at its start. pip's cache stays where
# it was.
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/pip}
export XDG_CACHE_HOME=$STATE/cache
mkdir -p "$XDG_CACHE_HOME/python-entrypoints"
: > "$XDG_CACHE_HOME/python-entrypoints/.disable"

case "$cmd" in
    up) up ;;
    demo) demo ;;
    down) down ;;
    status) status ;;
    package)
        from_state
        package=${args[0]:-}
        case "$package" in on|off|disabled) ;;
            *) die "usage: cloud.sh package on|off|disabled" ;; esac
        write_package_conf
        write_weigher_conf "$( [ "$package" = on ] && echo on || echo off)"
        restart_scheduler
        for n in 1 2; do
            start_libvirtd "$n"  # it is, unless something killed it
            stop_compute "$n"
            start_compute "$n"
        done
        wait_computes
        log "package $package (nova-scheduler's weigher $(cat "$STATE/weigher"))" ;;
    compute-series)
        from_state
        case "${args[0]:-}" in 1|2) ;; *) die "usage: cloud.sh compute-series 1|2 SERIES" ;; esac
        compute_series "${args[0]}" "${args[1]:?usage: cloud.sh compute-series N SERIES}" ;;
    reboot-host)
        from_state
        case "${args[0]:-}" in 1|2) ;; *) die "usage: cloud.sh reboot-host 1|2" ;; esac
        reboot_host "${args[0]}" ;;
    control)
        from_state
        control "${args[0]:-}" "${args[1]:-}" ;;
    weigher)
        from_state
        case "${args[0]:-}" in on|off) ;;
            *) die "usage: cloud.sh weigher on|off" ;; esac
        write_weigher_conf "${args[0]}"
        restart_scheduler
        log "nova-scheduler's weigher ${args[0]}" ;;
    restart-compute)
        from_state
        n=${args[0]:-}
        case "$n" in 1|2) ;; *) die "usage: cloud.sh restart-compute 1|2 [--kill]" ;; esac
        stop_compute "$n" "${args[1]:-}"
        start_libvirtd "$n"
        start_compute "$n"
        wait_computes ;;
    *) die "usage: cloud.sh up|demo|down|status|package on|off|weigher on|off|restart-compute N [--kill]|reboot-host N|control stop|start rabbitmq|mariadb" ;;
esac
