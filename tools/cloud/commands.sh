# shellcheck shell=bash
# tools/cloud.sh's part: the commands "up", "down", "status" and
# "demo", and from_state, which the others begin with. Sourced, never
# run. Invariant: "up" only starts what is not running, and refuses a
# state directory of another series or layout.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

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
    had=$(cat "$STATE/compute2-layout" 2>/dev/null || true)  # a new cloud: none
    if [ -f "$STATE/series" ] && [ "${had:-host}" != "$compute2" ]; then
        die "$STATE holds a cloud with nph-compute2 in the ${had:-host} layout: 'down --purge' first"
    fi
    if [ "$compute2" = kolla ]; then check_kolla_series; fi
    mkdir -p "$STATE"
    # The processes under $RUN are this state's cloud's from now on: the
    # other layout's "down" leaves them alone (run_by_other).
    echo "$STATE" > "$RUN/state"
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

run_by_other() {  # true if the cloud under $RUN is another state's
    local owner
    owner=$(cat "$RUN/state" 2>/dev/null || true)  # none: before owners were written
    [ -n "$owner" ] && [ "$owner" != "$STATE" ]
}

down() {
    local n s
    # Both layouts share $RUN, RabbitMQ and MariaDB's socket: bringing
    # down a state whose cloud is not the one up would stop the one up
    # (run-tests.sh downs the other layout before each cloud stage).
    if run_by_other; then
        log "$STATE: not up (the cloud up is $(cat "$RUN/state")'s); nothing stopped"
        return 0
    fi
    for n in 1 2; do stop_host "$n"; done
    for s in nova-scheduler nova-conductor nova-api neutron glance placement keystone; do
        stop_proc "$s" 10
    done
    timeout 60 rabbitmqctl -q -n rabbit@localhost stop >/dev/null 2>&1 || true  # not running
    stop_proc rabbitmq 5
    stop_proc mariadb 20
    rm -f "$RUN/state"
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
    local mode models
    mode=$(sed -n 's/^cpu_mode = //p' "$etc/nova/cpu-mode.conf" 2>/dev/null || true)  # none yet
    models=$(sed -n 's/^cpu_models = / /p' "$etc/nova/cpu-mode.conf" 2>/dev/null || true)  # none yet
    echo "guests' CPU mode: $mode$models ($STATE/cpu-mode.json: what was refused)"
}

from_state() {  # the series and switch the running cloud was built with
    [ -f "$STATE/series" ] || die "no cloud here: 'cloud.sh up' first"
    series=$(cat "$STATE/series"); venv=$CACHE/venv-$series; py=$venv/bin/python
    package=$(cat "$STATE/package")
}

demo() {  # what a newcomer sees: the package inside nova, in one step
    up
    local V=$venv/bin n e=$etc/nova what
    "$py" "$top/tools/cloud_setup.py" --password "$PASS" --state "$STATE" --demo
    for n in 1 2; do
        echo
        what="nova-pinning status on ${HOSTS[$((n - 1))]}"
        echo "$what (nova-compute's configuration):"
        if in_kolla "$n"; then
            local k=/var/lib/kolla/config_files
            try "$what" podman exec "${KOLLA_PREFIX}nova_compute" /var/lib/kolla/venv/bin/nova-pinning \
                --config-file "$k/nova.conf" --config-file "$k/compute$n.conf" \
                --config-file "$k/pinning$n.conf" --config-file "$k/kolla.conf" status
            continue
        fi
        try "$what" nsenter -t "$(pid_of "libvirtd$n")" -m -u -C -- "$V/nova-pinning" \
            --config-file "$e/nova.conf" --config-file "$e/compute$n.conf" \
            --config-file "$e/pinning$n.conf" status
    done
    echo
    echo "The guests stay: openstack --os-cloud nph-admin server list;" \
         "openstack --os-cloud nph-admin server delete nph-demo-1 nph-demo-2 nph-demo-3"
}
