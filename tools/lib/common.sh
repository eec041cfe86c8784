# shellcheck shell=bash
# What the tools' shell scripts share: how they speak (log, die, try),
# that they run as root (need_root), and the cloud's processes (spawn,
# alive, stop_proc, wait_http). Sourced, never run; it sets no shell
# options and starts nothing.
#
# Invariants:
# - die and need_root print "TOOL: WHY" on stderr and exit 2 (TOOL is
#   $tool_name, by default the script's file name): the tests read those
#   words, and 2 is every tool's "not run as asked".
# - log prints "TAG: WHAT" on $log_fd (stdout unless the script needs
#   its stdout for answers: kolla-images.sh prints image names there).
# - try never fails: it runs a command whose failure the script may
#   ignore, and says on stderr what failed, so nothing is ignored
#   silently.
# - The process helpers use the caller's RUN (pid files) and LOG (one
#   log a process) directories; a daemon they start holds no descriptor
#   of the caller's but its standard input, output and error. A pid file holds the pid and its start
#   time: pids wrap, and a reused pid must never be taken (and killed)
#   for one of ours. A zombie is no running process. stop_proc returns
#   once the process has ended, never while it may still hold what its
#   successor needs.
tool_name=${tool_name:-$(basename "$0")}  # die's prefix: "cloud.sh"
log_tag=${log_tag:-${tool_name%.sh}}  # log's prefix: "cloud"
log_fd=${log_fd:-1}

log() { echo "$log_tag: $*" >&"$log_fd"; }
die() { echo "$tool_name: $*" >&2; exit 2; }

need_root() { [ "$(id -u)" = 0 ] || die "run me as root"; }

try() {  # WHAT CMD...: CMD, its failure said on stderr, not fatal
    local what=$1 rc=0
    shift
    "$@" || rc=$?
    if [ "$rc" != 0 ]; then
        echo "$log_tag: ignored: $what failed (exit $rc)" >&2
    fi
    return 0
}

# --- processes: pid files under $RUN, logs under $LOG ---------------------
started() {  # PID: its start time, from /proc/PID/stat (after the comm)
    sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}'
}

running() {  # PID START: that process (by its start time) runs: not
             # ended, not a zombie (one nobody has reaped yet has ended)
    local state st
    read -r state st < <(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null \
                         | awk '{print $1, $20}') || return 1
    [ "$st" = "$2" ] && [ "$state" != Z ]
}

wait_gone() {  # PID START SECONDS: until that process ended; 1 if it
               # still runs after SECONDS
    local deadline=$(( $(date +%s) + $3 ))
    while running "$1" "$2"; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

record() {  # NAME PID
    echo "$2 $(started "$2")" > "$RUN/$1.pid"
}

pid_of() {  # NAME: the recorded pid, if that process still runs
    local pid st
    { read -r pid st < "$RUN/$1.pid"; } 2>/dev/null || return 1
    [ -n "$pid" ] && [ -n "$st" ] && running "$pid" "$st" || return 1
    echo "$pid"
}

alive() { pid_of "$1" >/dev/null; }

detached() {  # CMD...: exec CMD in a session of its own, with 0-2 only
    # A daemon keeps none of its caller's descriptors: a lock taken around
    # the caller ("flock /run/nph-cloud.lock tools/cloud.sh up") would
    # otherwise stay held by the daemons for as long as they run.
    local fd
    for fd in /proc/"$BASHPID"/fd/*; do
        fd=${fd##*/}
        if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    exec setsid "$@"
}

spawn() {  # NAME CMD...: start CMD in the background, detached, logged
    local name=$1; shift
    alive "$name" && return 0
    detached "$@" </dev/null >>"$LOG/$name.log" 2>&1 &
    record "$name" $!
}

stop_proc() {  # NAME [SECONDS]: TERM, then KILL after SECONDS (nova-compute
               # may not exit on TERM at all); returns once it has ended:
               # a start straight after must not meet the old process
               # (its pid file, socket, port or RPC consumer)
    local name=$1 wait=${2:-10} pid st
    if pid=$(pid_of "$name"); then
        st=$(started "$pid")
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true  # it ended meanwhile
        wait_gone "$pid" "$st" "$wait" || true  # it did not: KILL, below
        # Its group too: what it started and left (uwsgi's workers).
        kill -KILL -- "-$pid" 2>/dev/null || true  # no group left
        if running "$pid" "$st"; then
            kill -KILL "$pid" 2>/dev/null || true  # it ended meanwhile
        fi
        # SIGKILL takes effect when the process next leaves the kernel.
        wait_gone "$pid" "$st" 60 || die "$name ($pid) still runs 60 s after SIGKILL"
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
