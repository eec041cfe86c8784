# shellcheck shell=bash
# tools/cloud.sh's part: the two compute hosts' namespaces (host layout):
# each host's libvirtd, virtlogd and sshd, and their stop. Sourced,
# never run. Invariants: a host's daemons are found by their own pid
# files, never by name (other libvirtds run on this machine); a
# libvirtd that answers is left alone.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

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
    # A libvirtd that answers stays (with it, its guests' monitors). Not
    # answering within the bound is taken for hung, and restarted: the
    # bound is a loaded host's, not a quiet one's.
    if alive "libvirtd$n" && timeout "$VIRSH_PROBE" virsh -q -c "$uri" version >/dev/null 2>&1; then
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
        rm -rf "${dir:?}/etc"; mkdir -p "$dir/etc"
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
    # shellcheck disable=SC2016  # the inner bash expands them
    NPH_NAME=$name NPH_DIR=$dir NPH_GROUPS="${groups[*]}" \
    NPH_INSTANCES=$STATE/instances NPH_SSH=$STATE/ssh/client \
    detached bash -c '
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
    local deadline=$(( $(date +%s) + DAEMON_START ))
    until timeout "$VIRSH_PROBE" virsh -q -c "$uri" version >/dev/null 2>&1; do
        alive "libvirtd$n" || die "libvirtd of $name exited (see $LOG/libvirtd$n.log)"
        [ "$(date +%s)" -lt "$deadline" ] \
            || die "libvirtd of $name does not answer on port $port in $DAEMON_START s (see $LOG/libvirtd$n.log)"
        sleep 0.2
    done
}

stop_daemon() {  # N NAME PIDFILE: a host's daemon, by its pid file;
                 # returns once it has ended (the next start takes its
                 # pid file and address)
    local pid st
    pid=$(cat "$(host_dir "$1")/run/$3" 2>/dev/null || true)  # none: not running
    if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]; then
        st=$(started "$pid")
        kill "$pid" 2>/dev/null || true  # it ended meanwhile
        if ! wait_gone "$pid" "$st" 30; then
            kill -KILL "$pid" 2>/dev/null || true  # it ended meanwhile
            wait_gone "$pid" "$st" 60 || die "$2 of host $1 ($pid) still runs 60 s after SIGKILL"
        fi
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
