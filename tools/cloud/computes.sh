# shellcheck shell=bash
# tools/cloud.sh's part: the nova-computes (either layout): their
# configuration files, the guests' CPU mode, start, stop and the wait
# for their RPC servers, a compute on another series, a host's reboot.
# Sourced, never run. Invariant: every nova-compute this run started is
# waited for (started_computes) before a command ends.
# shellcheck disable=SC2154,SC2034  # the globals: tools/cloud.sh and its parts share them

nova_conf_args() {  # N: the config files of compute N
    echo "--config-file $etc/nova/nova.conf --config-file $etc/nova/cpu-mode.conf" \
         "--config-file $etc/nova/compute$1.conf --config-file $etc/nova/pinning$1.conf"
}

# The guests' CPU mode: nova's default (host-model) does not start on
# every machine (doc/source/reference/nova-integration.rst, "In a real cloud"): the first mode
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

# A compute on another nova release than the control plane (nova's
# rolling upgrade: computes one release behind, then upgraded in place):
# "cloud.sh compute-series 1 33" runs nph-compute1's nova-compute from a
# virtualenv of nova 33 with that series' upper-constraints and the
# package's wheel; "compute-series 1 34" back on the cloud's own. Host
# layout only (kolla's image holds nova 34).

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
    # shellcheck disable=SC2046  # nova_conf_args: words, split
    spawn "nova-compute$n" nsenter -t "$pid" -m -u -C -- \
        "$(compute_venv "$n")/bin/nova-compute" $(nova_conf_args "$n")
    started_computes+=("$n")
}

reboot_host() {  # N: what a power cut and a boot do to compute N
    local n=$1 f pid
    stop_compute "$n" --kill
    # The guests die with the host, where they run.
    local st
    for f in "$(host_dir "$n")"/run/libvirt/qemu/*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null) || continue  # gone meanwhile
        if [ -n "$pid" ] && grep -q qemu "/proc/$pid/cmdline" 2>/dev/null; then
            st=$(started "$pid")
            kill -KILL "$pid" 2>/dev/null || log "qemu $pid ended before its kill"
            # Dead before the host comes back: a libvirtd started while
            # it dies would find it running, then lose it.
            wait_gone "$pid" "$st" 60 || die "qemu $pid still runs 60 s after SIGKILL"
        fi
    done
    stop_host "$n"
    start_libvirtd "$n"
    start_compute "$n"
    wait_computes
}

compute_running() {  # N: its nova-compute, a process or a container
    if in_kolla "$1"; then
        [ "$(podman container inspect -f '{{.State.Running}}' \
             "${KOLLA_PREFIX}nova_compute" 2>/dev/null)" = true ]
    else
        alive "nova-compute$1"
    fi
}

stop_compute() {  # N [--kill]: TERM (KILL after 5 s), or KILL at once;
                  # returns once it has ended and RabbitMQ has dropped its
                  # consumer (wait_rpc_servers then sees the next one's)
    if in_kolla "$1"; then
        if [ "${2:-}" = --kill ]; then
            podman kill -s KILL "${KOLLA_PREFIX}nova_compute" >/dev/null 2>&1 || true  # not running
        fi
        kolla_compute stop compute
    elif [ "${2:-}" = --kill ]; then
        local pid st
        if pid=$(pid_of "nova-compute$1"); then
            st=$(started "$pid")
            kill -KILL -- "-$pid" 2>/dev/null || true  # it ended meanwhile
            wait_gone "$pid" "$st" 60 || die "nova-compute$1 ($pid) still runs 60 s after SIGKILL"
        fi
        rm -f "$RUN/nova-compute$1.pid"
    else
        stop_proc "nova-compute$1" 5
    fi
    local queue=compute.${HOSTS[$(($1 - 1))]} deadline=$(( $(date +%s) + 120 )) n
    until n=$(queue_consumers "$queue") && [ "$n" = 0 ]; do
        [ "$(date +%s)" -lt "$deadline" ] \
            || die "RabbitMQ still counts ${n:-unknown} consumers on $queue 120 s after nova-compute$1 ended"
        sleep 0.5
    done
}

wait_computes() {  # both nova-compute services up, both hosts in a cell
    "$py" "$top/tools/cloud_setup.py" --password "$PASS" --state "$STATE" \
        --wait-computes "${HOSTS[*]}" --seconds "$COMPUTE_START" >> "$LOG/bootstrap.log" 2>&1 \
        || die "the nova-computes did not come up (see $LOG/nova-compute1.log, $LOG/bootstrap.log)"
    wait_rpc_servers
}

# A nova-compute just started is ready once its RPC queue has a consumer:
# nova starts its RPC server after init_host. The API cannot tell: the
# service is "up" from the last process's heartbeat. A guest booted onto
# a host during its init_host is set to ERROR by it (BUILDING at start-up
# means "failed to spawn") and then built by the RPC that follows: seen
# as ERROR with no fault, then ACTIVE.
# The consumer counted is the new process's: stop_compute returned only
# once RabbitMQ had dropped the old one's.
wait_rpc_servers() {
    local n deadline=$(( $(date +%s) + COMPUTE_START )) queue c
    for n in "${started_computes[@]}"; do
        queue=compute.${HOSTS[$((n - 1))]}
        until c=$(queue_consumers "$queue") && [ "$c" -gt 0 ]; do
            compute_running "$n" || die "nova-compute$n exited (see $LOG/nova-compute$n.log)"
            [ "$(date +%s)" -lt "$deadline" ] \
                || die "nova-compute$n did not start its RPC server in $COMPUTE_START s (see $LOG/nova-compute$n.log)"
            sleep 0.5
        done
    done
    started_computes=()
}
