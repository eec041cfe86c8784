# shellcheck shell=bash
# tools/cloud.sh's part: the nova releases the cloud runs, in one place:
# the series a cloud is built on (--series: its default, the newest,
# and the ones accepted), the services of each (service_packages), the
# nova release of each series a compute may run (nova_release: the
# releases tox.ini tests) and what else its virtualenv needs, how uwsgi
# loads a series' APIs (wsgi_app), and the series kolla's image holds.
# Sourced, never run. Invariant: every other part asks these, none
# names a series or a release itself.
# shellcheck disable=SC2154,SC2034  # the globals: tools/cloud.sh and its parts share them

series=34  # the cloud's series unless --series says otherwise
kolla_series=34  # kolla's image holds nova 34 (tools/kolla-images.sh)

check_series() {  # --series: a series the cloud's services are known for
    case "$series" in 29|34) ;; *) die "--series is 29 or 34, not '$series'" ;; esac
}

# The services of one series (its upper-constraints: tools/constraints).
service_packages() {
    case "$series" in
        34) echo "nova==34.0.0 openstack-placement==16.0.0 keystone==30.0.0" \
                 "glance==33.0.0 neutron==29.0.0" ;;
        29) echo "nova==29.4.0 openstack-placement==11.0.1 keystone==25.0.0" \
                 "glance==28.2.0 neutron==24.2.2 setuptools<81" ;;
    esac
}

nova_release() {  # SERIES: the nova release tox.ini tests for it
    case "$1" in 29) echo 29.4.0 ;; 30) echo 30.3.0 ;; 31) echo 31.3.1 ;;
        32) echo 32.2.1 ;; 33) echo 33.0.2 ;; 34) echo 34.0.0 ;;
        *) die "no nova release known for series '$1'" ;; esac
}

# The application: series 34 ships WSGI modules; series 29 (2024.1) only
# pbr's generated scripts, which uwsgi loads as files.
# Series 29's nova-api and neutron-api monkey-patch with eventlet: a uwsgi
# worker of two native threads then loses RPC replies (nova-api's calls
# time out after 60 s while the callee answered at once): one thread a
# worker, as DevStack runs them.
wsgi_app() {  # MODULE SCRIPT: the uwsgi lines that load it
    case "$series" in
        29) printf 'wsgi-file = %s\nthreads = 1\n' "$venv/bin/$2" ;;
        *) printf 'module = %s\nthreads = 2\n' "$1" ;;
    esac
}

compute_pip_extras() {  # SERIES: what else its compute's virtualenv needs
    case "$1" in 29|30) echo 'setuptools<81' ;; esac
}
