# shellcheck shell=bash
# tools/cloud.sh's part: the nova releases the cloud runs, in one place,
# all read from tools/nova-releases (the one list, through
# tools/nova-releases.sh): the series a cloud is built on (--series: the
# newest by default, one with cloud= accepted), the services of each
# (service_packages), the nova release of each series a compute may run
# (nova_release), how uwsgi loads a series' APIs (wsgi_app), and the
# series kolla's image holds (check_kolla_series). Sourced, never run.
# Invariant: no part of the cloud names a series or a release itself;
# each asks these.
# shellcheck disable=SC2154,SC2034  # the globals: tools/cloud.sh and its parts share them

# shellcheck source=tools/nova-releases.sh
. "$top/tools/nova-releases.sh"  # the supported nova releases
series=$(nova_newest)  # the cloud's series unless --series says otherwise

check_series() {  # --series: a series the cloud's services are known for
    nova_has "$series" cloud 2>/dev/null || die "--series is one of $(nova_with cloud | paste -sd ' ') (tools/nova-releases: cloud=), not '$series'"
}

# The services of one series (its upper-constraints: tools/constraints).
service_packages() {  # (tools/nova-releases: nova=, placement=, cloud=, pip=)
    local p
    p="nova==$(nova_pypi_version "$series") openstack-placement==$(nova_fact "$series" placement)"
    p="$p $(nova_fact "$series" cloud) $(nova_fact "$series" pip)"
    p=${p//,/ }
    echo "${p% }"
}

nova_release() {  # SERIES: the nova release tox.ini tests for it
    nova_pypi_version "$1" || die "no nova release known for series '$1'"
}

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

check_kolla_series() {  # --compute2 kolla: the series kolla's image holds
    nova_has "$series" kolla \
        || die "--compute2 kolla runs series $(nova_with kolla) only (kolla's image holds that nova)"
}
