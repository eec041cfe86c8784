# shellcheck shell=bash
# tools/cloud.sh's part: what the API holds (keystone's users, the
# image, the flavors: tools/cloud_setup.py, once a series) and the
# clouds.yaml that reaches it. Sourced, never run. Invariant: no
# openstack client of someone else's is ever replaced.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

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
