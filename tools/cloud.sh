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
#   checkout and switched on as doc/source/nova.rst tells operators
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
#                                     # driver kept (nova.rst, "Switch it off")
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
# venv in the image, the package installed into it as deploy.rst tells
# kolla operators) in nova_compute, in its own PID namespace, both
# started by tools/kolla-compute.sh with kolla-ansible's options (host
# network: its address 127.0.0.12 and libvirt's port 16522 as before).
# What differs from the host layout, and why, is in doc/source/deploy.rst
# ("The cloud's nph-compute2 in kolla's containers").
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

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

# shellcheck source=tools/nova-releases.sh
. "$top/tools/nova-releases.sh"  # the supported nova releases
series=$(nova_newest)
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

die() { echo "cloud.sh: $*" >&2; exit 2; }
log() { echo "cloud: $*"; }
[ "$(id -u)" = 0 ] || die "run me as root"
nova_has "$series" cloud 2>/dev/null || die "--series is one of $(nova_with cloud | paste -sd ' ') (tools/nova-releases: cloud=), not '$series'"
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

# The services of one series (its upper-constraints: tools/constraints).
service_packages() {  # (tools/nova-releases: nova=, placement=, cloud=, pip=)
    local p
    p="nova==$(nova_pypi_version "$series") openstack-placement==$(nova_fact "$series" placement)"
    p="$p $(nova_fact "$series" cloud) $(nova_fact "$series" pip)"
    p=${p//,/ }
    echo "${p% }"
}

# --- processes: pid files under $RUN, logs under $LOG ---------------------
# A pid file holds the pid and its start time: pids wrap, and a reused
# pid must never be taken (and killed) for one of ours.
started() {  # PID: its start time, from /proc/PID/stat (after the comm)
    sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}'
}

record() {  # NAME PID
    echo "$2 $(started "$2")" > "$RUN/$1.pid"
}

pid_of() {  # NAME: the recorded pid, if that process still runs
    local pid st
    { read -r pid st < "$RUN/$1.pid"; } 2>/dev/null || return 1
    [ -n "$pid" ] && [ -n "$st" ] && [ "$(started "$pid")" = "$st" ] || return 1
    echo "$pid"
}

alive() { pid_of "$1" >/dev/null; }

spawn() {  # NAME CMD...: start CMD in the background, detached, logged
    local name=$1; shift
    alive "$name" && return 0
    setsid "$@" </dev/null >>"$LOG/$name.log" 2>&1 &
    record "$name" $!
}

stop_proc() {  # NAME [SECONDS]: TERM, then KILL after SECONDS (nova-compute
               # may not exit on TERM at all)
    local name=$1 wait=${2:-10} pid
    if pid=$(pid_of "$name"); then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq $((wait * 5))); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$RUN/$name.pid"
}

wait_http() {  # URL NAME: until it answers (any HTTP status), 90 s
    for _ in $(seq 300); do
        curl -s -o /dev/null -m 2 "$1" && return 0
        sleep 0.3
    done
    die "$2 does not answer on $1 (see $LOG/$2.log)"
}

# --- Debian's parts -------------------------------------------------------
debian() {
    # setup-host.sh installs what is missing; their postinst cannot
    # start these without systemd: we do, below.
    NPH_EXTRA_PACKAGES="mariadb-server rabbitmq-server curl openssh-server openssh-client" \
        "$top/tools/setup-host.sh" --packages-only
}

start_mariadb() {
    local data=$STATE/mysql
    if [ ! -d "$data/mysql" ]; then
        mkdir -p "$data"
        chown mysql:mysql "$data"
        mariadb-install-db --user=mysql --datadir="$data" \
            --auth-root-authentication-method=socket >/dev/null
    fi
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
    if ! mariadb-admin --socket="$SOCK" ping >/dev/null 2>&1; then
        spawn mariadb mariadbd --user=mysql --datadir="$data" \
            --bind-address=127.0.0.1 --port=3306 \
            --socket="$SOCK" --pid-file="/run/mysqld/nph-cloud.pid" \
            --max-connections=1000 --skip-log-bin
        for _ in $(seq 100); do
            mariadb-admin --socket="$SOCK" ping >/dev/null 2>&1 && break
            sleep 0.2
        done
        mariadb-admin --socket="$SOCK" ping >/dev/null 2>&1 \
            || die "MariaDB did not start (see $LOG/mariadb.log)"
    fi
}

sql() { mariadb --socket="$SOCK" -u root -e "$1"; }

start_rabbitmq() {
    # Loopback only, its Erlang distribution and epmd too.
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODENAME=rabbit@localhost \
        ERL_EPMD_ADDRESS=127.0.0.1 \
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    if ! timeout 20 rabbitmqctl -q -n rabbit@localhost status >/dev/null 2>&1; then
        log "starting RabbitMQ"
        HOME=/var/lib/rabbitmq spawn rabbitmq rabbitmq-server
        for _ in $(seq 60); do
            timeout 20 rabbitmqctl -q -n rabbit@localhost await_startup >/dev/null 2>&1 \
                && break
            sleep 1
        done
        timeout 20 rabbitmqctl -q -n rabbit@localhost status >/dev/null 2>&1 \
            || die "RabbitMQ did not start (see $LOG/rabbitmq.log)"
    fi
    # Nobody consumes the computes' notifications but a test: keep their
    # queues short, not growing with every run.
    rabbitmqctl -q -n rabbit@localhost set_policy nph-notifications \
        '^versioned_notifications\.' '{"max-length":2000}' --apply-to queues >/dev/null
    rabbitmqctl -q -n rabbit@localhost list_users 2>/dev/null | grep -q '^nph' || {
        rabbitmqctl -q -n rabbit@localhost add_user nph "$PASS" >/dev/null
        rabbitmqctl -q -n rabbit@localhost set_permissions nph '.*' '.*' '.*' >/dev/null
    }
}

# --- PyPI's parts ---------------------------------------------------------
build_venv() {
    local want stamp=$venv/.nph-built
    want="$(service_packages) $(sha256sum "$top/tools/constraints/nova-$series.txt" | cut -c1-16)"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        log "building $venv (a few minutes, once)"
        rm -rf "$venv"
        python3 -m venv "$venv"
        # shellcheck disable=SC2046
        "$venv/bin/pip" install -q --log "$LOG/pip.log" -c "$top/tools/constraints/nova-$series.txt" \
            $(service_packages) python-openstackclient osc-placement uwsgi \
            PyMySQL libvirt-python pyroute2 openstacksdk
        echo "$want" > "$stamp"
    fi
    # The package from this checkout (it is what we test), the way
    # OpenStack-Ansible installs it (doc/source/deploy.rst): a wheel,
    # into nova's venv, with the series' upper-constraints (os_nova's
    # nova_user_pip_packages go through the venv build with them), its
    # own requirements resolved there, nothing built. Installed again when
    # its source changed (one version, 1.0.0: uninstalled first), and
    # then running nova-computes restart.
    local sum wheels=$CACHE/wheels
    sum=$(cd "$top" && find nova_pinning_hooks setup.cfg setup.py requirements.txt \
          -type f \( -name '*.py' -o -name 'setup.*' -o -name '*.txt' \) \
          | sort | xargs sha256sum | sha256sum)
    if [ "$(cat "$venv/.nph-package" 2>/dev/null)" != "$sum" ]; then
        rm -rf "$wheels"; mkdir -p "$wheels"
        { "$venv/bin/pip" wheel -q --no-deps -w "$wheels" "$top" &&
          "$venv/bin/pip" uninstall -q -y nova-pinning-hooks &&
          "$venv/bin/pip" install -q -c "$top/tools/constraints/nova-$series.txt" \
              "$wheels"/nova_pinning_hooks-*.whl; } >"$LOG/package-install.log" 2>&1 \
            || die "cannot install the package's wheel into $venv (see $LOG/package-install.log)"
        echo "$sum" > "$venv/.nph-package"
        package_changed=1
    fi
}
package_changed=0

# --- configuration --------------------------------------------------------
auth_section() {  # SECTION USER
    cat <<EOF
[$1]
auth_type = password
auth_url = http://127.0.0.1:5000/v3
project_name = service
project_domain_name = Default
username = $2
user_domain_name = Default
password = $PASS
region_name = RegionOne
EOF
}

authtoken() {  # USER
    auth_section keystone_authtoken "$1"
    cat <<EOF
www_authenticate_uri = http://127.0.0.1:5000/v3
memcached_servers =
service_token_roles_required = true
EOF
}

write_configs() {
    local v=$venv
    mkdir -p "$etc"/{keystone,placement,glance,neutron,nova} \
        "$STATE"/{glance/images,glance/staging,glance/tasks,instances,fernet,credential}
    chmod 0700 "$etc" "$STATE/fernet" "$STATE/credential"
    local db="mysql+pymysql://nph:$PASS@127.0.0.1"
    local mq="rabbit://nph:$PASS@127.0.0.1:5672/"

    cat > "$etc/keystone/keystone.conf" <<EOF
[DEFAULT]
log_file = $LOG/keystone-app.log
[database]
connection = $db/keystone
[token]
provider = fernet
[fernet_tokens]
key_repository = $STATE/fernet
[credential]
key_repository = $STATE/credential
EOF

    { cat <<EOF
[DEFAULT]
log_file = $LOG/placement-app.log
[placement_database]
connection = $db/placement
[api]
auth_strategy = keystone
EOF
      authtoken placement; } > "$etc/placement/placement.conf"

    cp "$v/etc/glance/glance-api-paste.ini" "$etc/glance/"
    { cat <<EOF
[DEFAULT]
log_file = $LOG/glance-app.log
enabled_backends = file:file
[database]
connection = $db/glance
[paste_deploy]
flavor = keystone
[glance_store]
default_backend = file
[file]
filesystem_store_datadir = $STATE/glance/images
[os_glance_staging_store]
filesystem_store_datadir = $STATE/glance/staging
[os_glance_tasks_store]
filesystem_store_datadir = $STATE/glance/tasks
[oslo_policy]
enforce_new_defaults = true
EOF
      authtoken glance; } > "$etc/glance/glance-api.conf"

    cp "$v/etc/neutron/api-paste.ini" "$etc/neutron/"
    { cat <<EOF
[DEFAULT]
log_file = $LOG/neutron-app.log
core_plugin = ml2
service_plugins =
auth_strategy = keystone
transport_url = $mq
api_paste_config = $etc/neutron/api-paste.ini
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false
[database]
connection = $db/neutron
[ml2]
type_drivers = flat
tenant_network_types =
mechanism_drivers =
extension_drivers =
[oslo_concurrency]
lock_path = $STATE/neutron-lock
EOF
      authtoken neutron; echo; auth_section nova nova; } > "$etc/neutron/neutron.conf"
    : > "$etc/neutron/ml2_conf.ini"
    # neutron's port query reads Port.port_forwardings, a backref that
    # exists only once SQLAlchemy has configured the mappers (after a
    # first query of another kind) and the port forwarding model is
    # imported: without this, a fresh worker answers GET /v2.0/ports with
    # HTTP 500, and nova with it. Each uwsgi worker imports this first.
    cat > "$etc/neutron/nph_neutron_models.py" <<EOF
import neutron.db.migration.models.head  # noqa: F401  (every model)
from sqlalchemy import orm
orm.configure_mappers()
EOF

    cp "$v/etc/nova/api-paste.ini" "$etc/nova/"
    { cat <<EOF
[DEFAULT]
log_file = $LOG/nova-app.log
transport_url = $mq
my_ip = 127.0.0.1
state_path = $STATE/nova
instances_path = $STATE/instances
compute_driver = libvirt.LibvirtDriver
# A compute host that boots again starts the guests that ran on it, as
# operators set it (cloud.sh reboot-host, tests/day2).
resume_guests_state_on_host_boot = true
# The guests spin in a boot sector and never shut down cleanly: do not
# wait a minute for them at each stop (nor two at each soft reboot).
shutdown_timeout = 1
# One host can take a resize (tests/cloud resizes on the same host).
allow_resize_to_same_host = true
[wsgi]
api_paste_config = $etc/nova/api-paste.ini
[oslo_concurrency]
lock_path = $STATE/nova-lock
[scheduler]
discover_hosts_in_cells_interval = 2
[notifications]
# What the computes send to RabbitMQ (pinning<N>.conf names the drivers):
# nova's versioned notifications, instance.create.end and the like.
notification_format = versioned
[compute]
# A ratio an operator sets in placement reaches nova (and the package's
# overcommit file) within seconds, not the default 5 minutes.
resource_provider_association_refresh = 10
[vnc]
enabled = false
[spice]
enabled = false
[glance]
region_name = RegionOne
[image_cache]
manager_interval = -1
[libvirt]
virt_type = $(cat /run/nova-pinning-hooks/virt-type 2>/dev/null || echo kvm)
wait_soft_reboot_seconds = 1
# Everything runs as root here: privsep's helpers start directly (not
# through sudo and a rootwrap configuration).
[nova_sys_admin]
helper_command = $v/bin/privsep-helper
[privsep_osbrick]
helper_command = $v/bin/privsep-helper
[vif_plug_ovs_privileged]
helper_command = $v/bin/privsep-helper
[vif_plug_linux_bridge_privileged]
helper_command = $v/bin/privsep-helper
[workarounds]
# This nested CPU is Broadwell to libvirt and kvm64 to QEMU.
skip_cpu_compare_on_dest = true
EOF
      authtoken nova; echo
      auth_section placement nova; echo
      auth_section neutron nova; echo
      auth_section service_user nova
      echo "send_service_user_token = true"; } > "$etc/nova/nova.conf"
    # The databases, for the API, conductor and scheduler only: a
    # nova-compute with database settings logs "No DB access allowed".
    cat > "$etc/nova/nova-db.conf" <<EOF
[api_database]
connection = $db/nova_api
[database]
connection = $db/nova_cell1
EOF

    local i
    for i in 1 2; do
        local other=$((3 - i))
        { cat <<EOF
[DEFAULT]
host = nph-compute$i
my_ip = ${HOST_IPS[$((i - 1))]}
log_file = $LOG/nova-compute$i.log
state_path = $STATE/compute$i/nova
[libvirt]
connection_uri = qemu+tcp://${HOST_IPS[$((i - 1))]}:${LIBVIRT_PORTS[$((i - 1))]}/system
live_migration_uri = qemu+tcp://%s:${LIBVIRT_PORTS[$((other - 1))]}/system
EOF
          if [ "$i" = 2 ]; then
              # nova's own pins: a dedicated set for hw:cpu_policy=dedicated
              # guests, the rest shared (nova writes <vcpu cpuset=...>).
              printf '[compute]\ncpu_dedicated_set = 1\ncpu_shared_set = 0\n'
          fi
        } > "$etc/nova/compute$i.conf"
    done
    write_package_conf
}

# The operator's switch (doc/source/nova.rst), beside the notification
# driver a cloud whose other services consume nova's notifications has
# (doc/source/deploy.rst: kolla-ansible writes messagingv2 then): both
# lines, so that nova's notifications keep flowing while the package is
# on (tests/cloud/test_notifications.py); off removes ours only.
write_package_conf() {
    local i
    for i in 1 2; do
        {
            echo "[oslo_messaging_notifications]"
            echo "driver = messagingv2"
            if [ "$package" != off ]; then echo "driver = nova_pinning"; fi
            # Switched off the way doc/source/nova.rst says: loaded, only
            # the filter that keeps its pins out of migration and
            # unrescue XML.
            if [ "$package" = disabled ]; then
                printf '[nova_pinning]\nenabled = false\n'
            fi
        } > "$etc/nova/pinning$i.conf"
    done
    echo "$package" > "$STATE/package"
}

# nova-scheduler's weighers (doc/source/nova.rst, "Across the cloud"): on,
# nova's own and the package's OneToOneWeigher, on one line (a list
# option: a second line would replace the first); off, nova's default.
# It follows the package (an operator installs both), and "cloud.sh
# weigher on|off" switches it alone (tests/cloud/test_weigher.py).
write_weigher_conf() {  # on|off
    {
        echo "# cloud.sh weigher $1"
        if [ "$1" = on ]; then
            echo "[filter_scheduler]"
            echo "weight_classes = nova.scheduler.weights.all_weighers,nova_pinning_hooks.nova.weigher.OneToOneWeigher"
        fi
    } > "$etc/nova/scheduler.conf"
    echo "$1" > "$STATE/weigher"
}

restart_scheduler() {  # and wait until it consumes its RPC queue again
    local deadline=$(( $(date +%s) + 120 ))
    stop_proc nova-scheduler
    start_nova_services
    until timeout 30 rabbitmqctl -q -n rabbit@localhost list_consumers 2>/dev/null \
            | awk '$1 == "scheduler" { found = 1 } END { exit !found }'; do
        alive nova-scheduler || die "nova-scheduler exited (see $LOG/nova-scheduler.log)"
        [ "$(date +%s)" -lt "$deadline" ] \
            || die "nova-scheduler did not consume its queue in 120 s (see $LOG/nova-scheduler.log)"
        sleep 0.5
    done
}

nova_conf_args() {  # N: the config files of compute N
    echo "--config-file $etc/nova/nova.conf --config-file $etc/nova/cpu-mode.conf" \
         "--config-file $etc/nova/compute$1.conf --config-file $etc/nova/pinning$1.conf"
}

# The guests' CPU mode: nova's default (host-model) does not start on
# every machine (doc/source/nova.rst, "In a real cloud"): the first mode
# that a tiny guest on compute 1's libvirtd really starts with
# (tools/cpu_mode.py), kept with the cloud for this machine and probed
# again on another. One file for both computes, so they agree (live
# migration). A changed choice restarts running nova-computes.
cpu_mode_changed=0
choose_cpu_mode() {
    local out=$etc/nova/cpu-mode.conf lines
    local vt; vt=$(cat /run/nova-pinning-hooks/virt-type 2>/dev/null || echo kvm)
    lines=$("$py" "$top/tools/cpu_mode.py" --virt-type "$vt" \
            --uri "qemu+tcp://${HOST_IPS[0]}:${LIBVIRT_PORTS[0]}/system" \
            --cache "$STATE/cpu-mode.json" 2>"$RUN/cpu-mode.said") \
        || die "$(cat "$RUN/cpu-mode.said")"
    log "guests' $(cat "$RUN/cpu-mode.said")"
    if [ "$(cat "$out" 2>/dev/null)" != "$(printf '[libvirt]\n%s' "$lines")" ]; then
        printf '[libvirt]\n%s\n' "$lines" > "$out"
        cpu_mode_changed=1
    fi
}

# --- databases and keystone (once) -----------------------------------------
databases() {
    local d
    for d in keystone placement glance neutron nova_api nova_cell0 nova_cell1; do
        sql "CREATE DATABASE IF NOT EXISTS $d CHARACTER SET utf8mb4"
    done
    sql "CREATE USER IF NOT EXISTS 'nph'@'127.0.0.1' IDENTIFIED BY '$PASS';
         GRANT ALL PRIVILEGES ON *.* TO 'nph'@'127.0.0.1'; FLUSH PRIVILEGES"
    [ -f "$STATE/.synced-$series" ] && return 0
    log "creating the databases (once)"
    local kc="--config-file $etc/keystone/keystone.conf"
    # shellcheck disable=SC2086
    {
        "$venv/bin/keystone-manage" $kc db_sync
        "$venv/bin/keystone-manage" $kc fernet_setup --keystone-user root --keystone-group root
        "$venv/bin/keystone-manage" $kc credential_setup --keystone-user root --keystone-group root
        "$venv/bin/keystone-manage" $kc bootstrap --bootstrap-password "$PASS" \
            --bootstrap-admin-url http://127.0.0.1:5000/v3 \
            --bootstrap-internal-url http://127.0.0.1:5000/v3 \
            --bootstrap-public-url http://127.0.0.1:5000/v3 \
            --bootstrap-region-id RegionOne
        "$venv/bin/placement-manage" --config-file "$etc/placement/placement.conf" db sync
        "$venv/bin/glance-manage" --config-dir "$etc/glance" db_sync
        "$venv/bin/neutron-db-manage" --config-file "$etc/neutron/neutron.conf" \
            --config-file "$etc/neutron/ml2_conf.ini" upgrade head
        local nc="--config-file $etc/nova/nova.conf --config-file $etc/nova/nova-db.conf"
        "$venv/bin/nova-manage" $nc api_db sync
        "$venv/bin/nova-manage" $nc cell_v2 map_cell0 \
            --database_connection "mysql+pymysql://nph:$PASS@127.0.0.1/nova_cell0"
        "$venv/bin/nova-manage" $nc cell_v2 list_cells | grep -q ' cell1 ' || \
            "$venv/bin/nova-manage" $nc cell_v2 create_cell --name cell1
        "$venv/bin/nova-manage" $nc db sync
    } > "$LOG/db-sync.log" 2>&1 || die "database set-up failed (see $LOG/db-sync.log)"
    touch "$STATE/.synced-$series"
}

# --- the API services under uwsgi -----------------------------------------
# The application: series 34 ships WSGI modules; series 29 (2024.1) only
# pbr's generated scripts, which uwsgi loads as files (tools/nova-releases
# names them: wsgi-script).
# Series 29's nova-api and neutron-api monkey-patch with eventlet: a uwsgi
# worker of two native threads then loses RPC replies (nova-api's calls
# time out after 60 s while the callee answered at once): one thread a
# worker, as DevStack runs them.
wsgi_app() {  # MODULE SCRIPT: the uwsgi lines that load it
    if nova_has "$series" wsgi-script; then
        printf 'wsgi-file = %s\nthreads = 1\n' "$venv/bin/$2"
    else
        printf 'module = %s\nthreads = 2\n' "$1"
    fi
}

uwsgi_api() {  # NAME PORT "MODULE SCRIPT" ENV=VALUE [MORE INI LINES]
    local name=$1 port=$2 envvar=$4 more=${5:-}
    # shellcheck disable=SC2086
    local app; app=$(wsgi_app $3)
    alive "$name" && return 0
    cat > "$etc/$name-uwsgi.ini" <<EOF
[uwsgi]
http-socket = 127.0.0.1:$port
$app
virtualenv = $venv
env = $envvar
master = true
processes = 2
enable-threads = true
lazy-apps = true
die-on-term = true
buffer-size = 65535
# uwsgi's http-socket closes connections silently: say so, or a client
# reuses a closed connection (ConnectionResetError).
add-header = Connection: close
http-raw-body = true
http-chunked-input = true
http-auto-chunked = true
chunked-input-limit = 10240000
post-buffering = 4096
$more
EOF
    spawn "$name" "$venv/bin/uwsgi" --ini "$etc/$name-uwsgi.ini"
}

start_apis() {
    uwsgi_api keystone 5000 "keystone.wsgi.api keystone-wsgi-public" \
        "OS_KEYSTONE_CONFIG_FILES=$etc/keystone/keystone.conf"
    wait_http http://127.0.0.1:5000/v3 keystone
    uwsgi_api placement 8778 "placement.wsgi.api placement-api" "OS_PLACEMENT_CONFIG_DIR=$etc/placement"
    uwsgi_api glance 9292 "glance.wsgi.api glance-wsgi-api" "OS_GLANCE_CONFIG_DIR=$etc/glance"
    uwsgi_api neutron 9696 "neutron.wsgi.api neutron-api" \
        "OS_NEUTRON_CONFIG_FILES=$etc/neutron/neutron.conf;$etc/neutron/ml2_conf.ini" \
        "pythonpath = $etc/neutron
import = nph_neutron_models"
    uwsgi_api nova-api 8774 "nova.wsgi.osapi_compute nova-api-wsgi" \
        "OS_NOVA_CONFIG_FILES=$etc/nova/api-paste.ini;$etc/nova/nova.conf;$etc/nova/nova-db.conf"
    wait_http http://127.0.0.1:8778/ placement
    wait_http http://127.0.0.1:9292/ glance
    wait_http http://127.0.0.1:9696/ neutron
    wait_http http://127.0.0.1:8774/ nova-api
}

# After bootstrap: nova 29's conductor asks keystone (as the nova user)
# at start and exits when that user does not exist yet.
start_nova_services() {
    spawn nova-conductor "$venv/bin/nova-conductor" --config-file "$etc/nova/nova.conf" \
        --config-file "$etc/nova/nova-db.conf" \
        --log-file "$LOG/nova-conductor.log"
    [ -f "$etc/nova/scheduler.conf" ] || write_weigher_conf \
        "$( [ "$package" = on ] && echo on || echo off)"
    spawn nova-scheduler "$venv/bin/nova-scheduler" --config-file "$etc/nova/nova.conf" \
        --config-file "$etc/nova/nova-db.conf" --config-file "$etc/nova/scheduler.conf" \
        --log-file "$LOG/nova-scheduler.log"
}

# --- the two compute hosts -------------------------------------------------
# Each host: its own libvirtd (and virtlogd) in a mount, UTS and cgroup
# namespace, and its nova-compute entered into the same namespaces.
host_dir() { echo "$STATE/compute$1"; }

# nova copies a guest's disk to another host with ssh and scp, as root
# here: one key, each host's sshd on its own address and port, and a
# client configuration (root's ~/.ssh in each host's namespace) that
# knows both.
ssh_keys() {
    local k=$STATE/ssh
    mkdir -p "$k/client"
    chmod 0700 "$k" "$k/client"
    [ -f "$k/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$k/host_ed25519"
    [ -f "$k/client/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$k/client/id_ed25519"
    install -m 0600 "$k/client/id_ed25519.pub" "$k/authorized_keys"
    {
        local i
        for i in 0 1; do
            printf 'Host %s %s\n  HostName %s\n  Port %s\n' "${HOST_IPS[$i]}" \
                "${HOSTS[$i]}" "${HOST_IPS[$i]}" "${SSH_PORTS[$i]}"
        done
        printf 'Host *\n  User root\n  IdentityFile /root/.ssh/id_ed25519\n'
        printf '  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n'
    } > "$k/client/config"
    chmod 0600 "$k/client/config"
}

# What both layouts give a host: its sshd's configuration (on the
# host's address and port, for nova's disk copies) and its /etc/hosts
# (both hosts' names on loopback: live migration's URI).
host_files() {  # N
    local n=$1 dir
    dir=$(host_dir "$n")
    ssh_keys
    cat > "$dir/sshd_config" <<EOF
ListenAddress ${HOST_IPS[$((n - 1))]}:${SSH_PORTS[$((n - 1))]}
HostKey $STATE/ssh/host_ed25519
AuthorizedKeysFile $STATE/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PidFile /run/sshd-nph.pid
# scp speaks SFTP since OpenSSH 9.0.
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
    printf '127.0.0.1 localhost\n%s %s\n%s %s\n' "${HOST_IPS[0]}" "${HOSTS[0]}" \
        "${HOST_IPS[1]}" "${HOSTS[1]}" > "$dir/hosts"
}

start_libvirtd() {  # N
    local n=$1 dir name=${HOSTS[$(($1 - 1))]} port=${LIBVIRT_PORTS[$(($1 - 1))]}
    local uri="qemu+tcp://${HOST_IPS[$(($1 - 1))]}:$port/system"
    if in_kolla "$n"; then start_kolla_libvirtd; return; fi
    dir=$(host_dir "$n")
    if alive "libvirtd$n" && timeout 5 virsh -q -c "$uri" version >/dev/null 2>&1; then
        return 0
    fi
    # What a libvirtd killed alone leaves: its virtlogd holding its pid
    # file, the host's sshd holding its address.
    stop_host "$n"
    mkdir -p "$dir"/{run,lib,cache,log,etc,pinning,nova,instances}
    chmod 0755 "$dir/pinning"
    mkdir -p "$dir/pinning/nova"
    # The daemon's configuration, never the system daemon's domains.
    if [ ! -f "$dir/etc/libvirtd.conf.nph" ]; then
        rm -rf "$dir/etc"; mkdir -p "$dir/etc"
        cp -a /etc/libvirt/. "$dir/etc/"
        rm -rf "$dir/etc/qemu" "$dir/etc/storage" "$dir/etc/nwfilter" "$dir/etc/secrets"
        mkdir -p "$dir/etc/qemu"
        touch "$dir/etc/libvirtd.conf.nph"
    fi
    cat > "$dir/etc/libvirtd.conf" <<EOF
host_uuid = "6a8b1c2d-0000-4000-8000-00000000c10$n"
listen_tls = 0
listen_tcp = 1
tcp_port = "$port"
listen_addr = "${HOST_IPS[$((n - 1))]}"
auth_tcp = "none"
EOF
    host_files "$n"
    cat > "$dir/etc/qemu.conf" <<EOF
migration_port_min = $((49400 + 100 * n))
migration_port_max = $((49499 + 100 * n))
EOF
    # The compute's cgroup subtree: created under this shell's own group
    # of each v1 controller, entered before the cgroup namespace is made,
    # so inside it the subtree is the root.
    local ctl sub base groups=()
    for ctl in cpuset cpu cpuacct memory blkio devices freezer pids; do
        [ -d "/sys/fs/cgroup/$ctl" ] || continue
        base=$(awk -F: -v c="$ctl" '{n=split($2,a,","); for(i=1;i<=n;i++) if(a[i]==c) print $3}' /proc/self/cgroup)
        sub="/sys/fs/cgroup/$ctl${base%/}/$name"
        mkdir -p "$sub"
        if [ "$ctl" = cpuset ]; then
            cat "$(dirname "$sub")/cpuset.cpus" > "$sub/cpuset.cpus"
            cat "$(dirname "$sub")/cpuset.mems" > "$sub/cpuset.mems"
        fi
        groups+=("$ctl=$sub")
    done
    mkdir -p "$dir/instances" "$STATE/instances"
    NPH_NAME=$name NPH_DIR=$dir NPH_GROUPS="${groups[*]}" \
    NPH_INSTANCES=$STATE/instances NPH_SSH=$STATE/ssh/client \
    setsid bash -c '
        set -e
        for g in $NPH_GROUPS; do echo $$ > "${g#*=}/cgroup.procs"; done
        exec unshare -m -u -C --propagation private bash -c "
            set -e
            hostname \$NPH_NAME
            for g in \$NPH_GROUPS; do
                mount --bind \${g#*=} /sys/fs/cgroup/\${g%%=*}
            done
            mount --bind \$NPH_DIR/run /run
            mount --bind \$NPH_DIR/lib /var/lib/libvirt
            mount --bind \$NPH_DIR/cache /var/cache/libvirt
            mount --bind \$NPH_DIR/log /var/log/libvirt
            mount --bind \$NPH_DIR/etc /etc/libvirt
            mount --bind \$NPH_DIR/hosts /etc/hosts
            mkdir -p /var/lib/nova-pinning-hooks
            mount --bind \$NPH_DIR/pinning /var/lib/nova-pinning-hooks
            mount --bind \$NPH_DIR/instances \$NPH_INSTANCES
            mkdir -p /root/.ssh
            mount --bind \$NPH_SSH /root/.ssh
            mkdir -p /run/sshd
            /usr/sbin/sshd -f \$NPH_DIR/sshd_config
            mkdir -p /run/libvirt/qemu /run/lock /run/mysqld /var/lib/libvirt/qemu \\
                     /var/cache/libvirt/qemu /var/log/libvirt/qemu
            virtlogd -d
            exec libvirtd --listen -f /etc/libvirt/libvirtd.conf
        "
    ' </dev/null >>"$LOG/libvirtd$n.log" 2>&1 &
    record "libvirtd$n" $!
    for _ in $(seq 100); do
        timeout 5 virsh -q -c "$uri" version >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    die "libvirtd of $name does not answer on port $port (see $LOG/libvirtd$n.log)"
}

# A compute on another nova release than the control plane (nova's
# rolling upgrade: computes one release behind, then upgraded in place):
# "cloud.sh compute-series 1 33" runs nph-compute1's nova-compute from a
# virtualenv of nova 33 with that series' upper-constraints and the
# package's wheel; "compute-series 1 34" back on the cloud's own. Host
# layout only (kolla's image holds nova 34).
nova_release() {  # SERIES: the nova release tox.ini tests for it
    nova_pypi_version "$1" || die "no nova release known for series '$1'"
}

compute_venv() {  # N: where compute N's nova-compute runs from
    local s
    s=$(cat "$STATE/compute$1-series" 2>/dev/null || echo "$series")
    if [ "$s" = "$series" ]; then echo "$venv"; else echo "$CACHE/venv-compute-$s"; fi
}

build_compute_venv() {  # SERIES
    local s=$1 v=$CACHE/venv-compute-$1 want
    local c=$top/tools/constraints/nova-$1.txt
    [ -f "$c" ] || die "no constraints for nova series $s ($c)"
    want="nova==$(nova_release "$s") $(sha256sum "$c" | cut -c1-16) $(cat "$venv/.nph-package")"
    [ "$(cat "$v/.nph-built" 2>/dev/null)" = "$want" ] && return 0
    log "building $v (nova $(nova_release "$s") for a compute, once)"
    rm -rf "$v"
    python3 -m venv "$v"
    local extra=()
    read -ra extra <<<"$(nova_pip "$s")"
    { "$v/bin/pip" install -q -c "$c" "nova==$(nova_release "$s")" libvirt-python \
          pyroute2 "${extra[@]}" &&
      "$v/bin/pip" install -q -c "$c" "$CACHE"/wheels/nova_pinning_hooks-*.whl; } \
        >"$LOG/compute-venv-$s.log" 2>&1 \
        || die "cannot build $v (see $LOG/compute-venv-$s.log)"
    echo "$want" > "$v/.nph-built"
}

compute_series() {  # N SERIES
    local n=$1 s=$2
    in_kolla "$n" && die "compute $n runs in kolla's containers: its nova is the image's"
    [ "$s" = "$series" ] || build_compute_venv "$s"
    echo "$s" > "$STATE/compute$n-series"
    stop_compute "$n"
    # nova refuses a service older than the oldest of its kind already
    # recorded (ServiceTooOld: a compute downgraded in place). A rolling
    # upgrade has the compute on the older release from before the
    # control plane moved: its service record says so, as set here
    # (the cloud was built on one release).
    # nova-conductor and nova-scheduler keep the minimum versions they
    # read (a cache, and the compute RPC pin of [upgrade_levels]
    # compute = auto): restarted, as after a control plane's upgrade.
    local v cur
    v=$("$(compute_venv "$n")/bin/python" -c \
        'from nova.objects import service; print(service.SERVICE_VERSION)') \
        || die "cannot read nova $s's service version"
    cur=$(mariadb --socket="$SOCK" -u root -N -e "SELECT version FROM nova_cell1.services WHERE host = 'nph-compute$n' AND \`binary\` = 'nova-compute' AND deleted = 0")
    if [ -n "$cur" ] && [ "$cur" -gt "$v" ]; then
        sql "UPDATE nova_cell1.services SET version = $v WHERE host = 'nph-compute$n' AND \`binary\` = 'nova-compute' AND deleted = 0"
        stop_proc nova-conductor
        restart_scheduler
    fi
    start_libvirtd "$n"
    start_compute "$n"
    wait_computes
}

start_compute() {  # N
    local n=$1 pid
    if in_kolla "$n"; then start_kolla_compute; return; fi
    alive "nova-compute$n" && return 0
    pid=$(pid_of "libvirtd$n") || die "the libvirtd of compute $n is not running"
    mkdir -p "$(host_dir "$n")/nova"
    # shellcheck disable=SC2046
    spawn "nova-compute$n" nsenter -t "$pid" -m -u -C -- \
        "$(compute_venv "$n")/bin/nova-compute" $(nova_conf_args "$n")
    started_computes+=("$n")
}

reboot_host() {  # N: what a power cut and a boot do to compute N
    local n=$1 f pid
    stop_compute "$n" --kill
    # The guests die with the host, where they run.
    for f in "$(host_dir "$n")"/run/libvirt/qemu/*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null) || continue  # gone meanwhile
        if [ -n "$pid" ] && grep -q qemu "/proc/$pid/cmdline" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || log "qemu $pid ended before its kill"
        fi
    done
    stop_host "$n"
    start_libvirtd "$n"
    start_compute "$n"
    wait_computes
}

control() {  # stop|start rabbitmq|mariadb: the control plane failing
    case "$1 $2" in
        "stop rabbitmq") rabbitmqctl -q -n rabbit@localhost stop_app ;;
        "start rabbitmq") rabbitmqctl -q -n rabbit@localhost start_app ;;
        "stop mariadb") mariadb-admin --socket="$SOCK" shutdown ;;
        "start mariadb") start_mariadb ;;
        *) die "usage: cloud.sh control stop|start rabbitmq|mariadb" ;;
    esac
}

stop_daemon() {  # N NAME PIDFILE: a host's daemon, by its pid file
    local pid
    pid=$(cat "$(host_dir "$1")/run/$3" 2>/dev/null || true)
    if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 25); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
}

stop_host() {  # N
    if in_kolla "$1"; then
        kolla_compute stop  # its guests destroyed, then the containers
        stop_daemon "$1" sshd sshd-nph.pid
        return
    fi
    stop_proc "nova-compute$1" 5
    stop_proc "libvirtd$1" 10
    stop_daemon "$1" virtlogd virtlogd.pid
    stop_daemon "$1" sshd sshd-nph.pid
}

compute_running() {  # N: its nova-compute, a process or a container
    if in_kolla "$1"; then
        [ "$(podman container inspect -f '{{.State.Running}}' \
             "${KOLLA_PREFIX}nova_compute" 2>/dev/null)" = true ]
    else
        alive "nova-compute$1"
    fi
}

stop_compute() {  # N [--kill]: TERM (KILL after 5 s), or KILL at once
    if in_kolla "$1"; then
        if [ "${2:-}" = --kill ]; then
            podman kill -s KILL "${KOLLA_PREFIX}nova_compute" >/dev/null 2>&1 || true
        fi
        kolla_compute stop compute
    elif [ "${2:-}" = --kill ]; then
        local pid
        if pid=$(pid_of "nova-compute$1"); then
            kill -KILL -- "-$pid" 2>/dev/null || true
        fi
        rm -f "$RUN/nova-compute$1.pid"
    else
        stop_proc "nova-compute$1" 5
    fi
}

# --- nph-compute2 in kolla-ansible's containers (--compute2 kolla) ---------
# tools/kolla-compute.sh starts them with kolla-ansible's options; what
# this cloud adds (doc/source/deploy.rst, "The cloud's nph-compute2 in
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
    sshd=$(cat "$dir/run/sshd-nph.pid" 2>/dev/null || true)
    if [ "$(podman container inspect -f '{{.State.Running}}' \
            "${KOLLA_PREFIX}nova_libvirt" 2>/dev/null)" = true ] \
       && timeout 5 virsh -q -c "$uri" version >/dev/null 2>&1 \
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

# --- what the API holds (keystone's users, the image, the flavors) ---------
bootstrap() {
    [ -f "$STATE/.bootstrapped-$series" ] && return 0
    log "creating users, endpoints, image and flavors (once)"
    "$py" "$top/tools/cloud_setup.py" --password "$PASS" --state "$STATE" \
        > "$LOG/bootstrap.log" 2>&1 || die "bootstrap failed (see $LOG/bootstrap.log)"
    touch "$STATE/.bootstrapped-$series"
}

clouds_yaml() {
    mkdir -p /etc/openstack
    local tmp
    tmp=$(mktemp /etc/openstack/.clouds.XXXXXX)
    cat > "$tmp" <<EOF
# Written by nova-pinning-hooks' tools/cloud.sh: a test cloud on 127.0.0.1.
clouds:
  nph:
    auth:
      auth_url: http://127.0.0.1:5000/v3
      username: nph
      password: $PASS
      project_name: nph
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    identity_api_version: 3
  nph-admin:
    auth:
      auth_url: http://127.0.0.1:5000/v3
      username: admin
      password: $PASS
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    identity_api_version: 3
EOF
    chmod 0600 "$tmp"
    mv -f "$tmp" /etc/openstack/clouds.yaml
    # The cloud's openstack client on PATH, so that 'openstack --os-cloud
    # nph-admin ...' works as the README says; never over a client of
    # someone else's (only a missing one or a link of ours is replaced).
    local cli=/usr/local/bin/openstack
    if [ ! -e "$cli" ] && [ ! -L "$cli" ] || \
            { [ -L "$cli" ] && [[ $(readlink "$cli") == "$CACHE"/venv-*/bin/openstack ]]; }; then
        ln -sfn "$venv/bin/openstack" "$cli"
    fi
}

wait_computes() {  # both nova-compute services up, both hosts in a cell
    "$py" "$top/tools/cloud_setup.py" --password "$PASS" --state "$STATE" \
        --wait-computes "${HOSTS[*]}" >> "$LOG/bootstrap.log" 2>&1 \
        || die "the nova-computes did not come up (see $LOG/nova-compute1.log, $LOG/bootstrap.log)"
    wait_rpc_servers
}

# A nova-compute just started is ready once its RPC queue has a consumer:
# nova starts its RPC server after init_host. The API cannot tell: the
# service is "up" from the last process's heartbeat. A guest booted onto
# a host during its init_host is set to ERROR by it (BUILDING at start-up
# means "failed to spawn") and then built by the RPC that follows: seen
# as ERROR with no fault, then ACTIVE.
wait_rpc_servers() {
    local n deadline=$(( $(date +%s) + 180 )) queue
    for n in "${started_computes[@]}"; do
        queue=compute.${HOSTS[$((n - 1))]}
        until timeout 30 rabbitmqctl -q -n rabbit@localhost list_queues name consumers 2>/dev/null \
                | awk -v q="$queue" '$1 == q && $2 > 0 { found = 1 } END { exit !found }'; do
            compute_running "$n" || die "nova-compute$n exited (see $LOG/nova-compute$n.log)"
            [ "$(date +%s)" -lt "$deadline" ] \
                || die "nova-compute$n did not start its RPC server in 180 s (see $LOG/nova-compute$n.log)"
            sleep 0.5
        done
    done
    started_computes=()
}

up() {
    local start n
    start=$(date +%s)
    [ -e /run/nova-pinning-hooks/virt-type ] || "$top/tools/setup-host.sh" >/dev/null
    debian
    build_venv
    if [ -f "$STATE/series" ] && [ "$(cat "$STATE/series")" != "$series" ]; then
        die "$STATE holds a series $(cat "$STATE/series") cloud: 'down --purge' first"
    fi
    # nph-compute2's layout is the cloud's for good: its nova node name
    # (libvirtd's hostname) differs between the two.
    local had
    had=$(cat "$STATE/compute2-layout" 2>/dev/null || true)
    if [ -f "$STATE/series" ] && [ "${had:-host}" != "$compute2" ]; then
        die "$STATE holds a cloud with nph-compute2 in the ${had:-host} layout: 'down --purge' first"
    fi
    if [ "$compute2" = kolla ] && ! nova_has "$series" kolla; then
        die "--compute2 kolla runs series $(nova_with kolla) only (kolla's image holds that nova)"
    fi
    mkdir -p "$STATE"
    echo "$series" > "$STATE/series"
    echo "$compute2" > "$STATE/compute2-layout"
    write_configs
    start_mariadb
    start_rabbitmq
    databases
    start_apis
    bootstrap
    start_nova_services
    clouds_yaml
    for n in 1 2; do start_libvirtd "$n"; done
    choose_cpu_mode
    for n in 1 2; do
        [ "$package_changed$cpu_mode_changed" != 00 ] && stop_compute "$n"
        start_compute "$n"
    done
    wait_computes
    log "up in $(( $(date +%s) - start )) s: series $series, package $package," \
        "nph-compute2 in the $compute2 layout;" \
        "openstack --os-cloud nph-admin ..."
}

down() {
    local n s
    for n in 1 2; do stop_host "$n"; done
    for s in nova-scheduler nova-conductor nova-api neutron glance placement keystone; do
        stop_proc "$s" 10
    done
    timeout 60 rabbitmqctl -q -n rabbit@localhost stop >/dev/null 2>&1 || true
    stop_proc rabbitmq 5
    stop_proc mariadb 20
    if [ "${args[0]:-}" = --purge ]; then
        rm -rf "$STATE"
        log "purged $STATE"
    fi
}

status() {
    local s
    for s in mariadb rabbitmq keystone placement glance neutron nova-api \
             nova-conductor nova-scheduler libvirtd1 libvirtd2 nova-compute1 nova-compute2; do
        case "$s" in  # host 2's are containers there (below)
            libvirtd2|nova-compute2) in_kolla 2 && continue ;;
        esac
        if alive "$s"; then echo "$s: running ($(pid_of "$s"))"; else echo "$s: stopped"; fi
    done
    echo "package: $(cat "$STATE/package" 2>/dev/null || echo unknown)"
    echo "nova-scheduler's weigher: $(cat "$STATE/weigher" 2>/dev/null || echo unknown)"
    echo "series: $(cat "$STATE/series" 2>/dev/null || echo none)"
    echo "nph-compute2's layout: $compute2"
    if [ "$compute2" = kolla ]; then
        podman ps -a --filter "name=^$KOLLA_PREFIX" --format '{{.Names}}: {{.Status}}'
    fi
    echo "guests' CPU mode: $(sed -n 's/^cpu_mode = //p' "$etc/nova/cpu-mode.conf" \
        2>/dev/null || true)$(sed -n 's/^cpu_models = / /p' "$etc/nova/cpu-mode.conf" \
        2>/dev/null || true) ($STATE/cpu-mode.json: what was refused)"
}

from_state() {  # the series and switch the running cloud was built with
    [ -f "$STATE/series" ] || die "no cloud here: 'cloud.sh up' first"
    series=$(cat "$STATE/series"); venv=$CACHE/venv-$series; py=$venv/bin/python
    package=$(cat "$STATE/package")
}

demo() {  # what a newcomer sees: the package inside nova, in one step
    up
    local V=$venv/bin n e=$etc/nova
    "$py" "$top/tools/cloud_setup.py" --password "$PASS" --state "$STATE" --demo
    for n in 1 2; do
        echo
        echo "nova-pinning status on ${HOSTS[$((n - 1))]} (nova-compute's configuration):"
        if in_kolla "$n"; then
            local k=/var/lib/kolla/config_files
            podman exec "${KOLLA_PREFIX}nova_compute" /var/lib/kolla/venv/bin/nova-pinning \
                --config-file "$k/nova.conf" --config-file "$k/compute$n.conf" \
                --config-file "$k/pinning$n.conf" --config-file "$k/kolla.conf" status || true
            continue
        fi
        nsenter -t "$(pid_of "libvirtd$n")" -m -u -C -- "$V/nova-pinning" \
            --config-file "$e/nova.conf" --config-file "$e/compute$n.conf" \
            --config-file "$e/pinning$n.conf" status || true
    done
    echo
    echo "The guests stay: openstack --os-cloud nph-admin server list;" \
         "openstack --os-cloud nph-admin server delete nph-demo-1 nph-demo-2 nph-demo-3"
}

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
