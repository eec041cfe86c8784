# shellcheck shell=bash
# tools/cloud.sh's part: Debian's parts, MariaDB and RabbitMQ, started by
# hand (no systemd), and stopped or started again by "cloud.sh control".
# Sourced by tools/cloud.sh, never run. Invariants: both listen on
# loopback only; each start waits until the service answers or dies.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

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

stop_mariadb() {  # shut down, and wait until the process is gone
    mariadb-admin --socket="$SOCK" shutdown
    # mariadb-admin returns when the server has begun to shut down: a
    # start straight after would find the old process still recorded
    # (spawn starts nothing while it lives) and no socket to answer.
    for _ in $(seq 300); do
        alive mariadb || return 0
        sleep 0.2
    done
    die "MariaDB still runs 60 s after its shutdown (see $LOG/mariadb.log)"
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

queue_consumers() {  # QUEUE: the consumers RabbitMQ counts on it (0: none,
                     # or no such queue); fails when RabbitMQ does not answer
    local out
    out=$(timeout 30 rabbitmqctl -q -n rabbit@localhost list_queues name consumers 2>/dev/null) \
        || return 1
    awk -v q="$1" '$1 == q { n = $2 } END { print n + 0 }' <<<"$out"
}

control() {  # stop|start rabbitmq|mariadb: the control plane failing
    case "$1 $2" in
        "stop rabbitmq") rabbitmqctl -q -n rabbit@localhost stop_app ;;
        "start rabbitmq") rabbitmqctl -q -n rabbit@localhost start_app ;;
        "stop mariadb") stop_mariadb ;;
        "start mariadb") start_mariadb ;;
        *) die "usage: cloud.sh control stop|start rabbitmq|mariadb" ;;
    esac
}
