# shellcheck shell=bash
# tools/cloud.sh's part: the keystone credentials each service's
# configuration holds. Sourced, never run; writes nothing itself.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

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
