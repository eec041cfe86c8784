# shellcheck shell=bash
# tools/cloud.sh's part: PyPI's parts, the cloud's virtualenv (the
# services of its series and the package's wheel from this checkout) and
# the virtualenvs of computes on another series. Sourced by
# tools/cloud.sh, never run. Invariants: a virtualenv is rebuilt only
# when its stamp (what it holds) differs from what is wanted; the
# package is installed again when its sources changed, and then
# package_changed is 1 (the running nova-computes restart).
# shellcheck disable=SC2154,SC2034  # the globals: tools/cloud.sh and its parts share them

build_venv() {
    local want stamp=$venv/.nph-built
    want="$(service_packages) $(sha256sum "$top/tools/constraints/nova-$series.txt" | cut -c1-16)"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        log "building $venv (a few minutes, once)"
        rm -rf "$venv"
        python3 -m venv "$venv"
        # shellcheck disable=SC2046  # service_packages: requirements, split into words
        "$venv/bin/pip" install -q --log "$LOG/pip.log" -c "$top/tools/constraints/nova-$series.txt" \
            $(service_packages) python-openstackclient osc-placement uwsgi \
            PyMySQL libvirt-python pyroute2 openstacksdk
        echo "$want" > "$stamp"
    fi
    # The package from this checkout (it is what we test), the way
    # OpenStack-Ansible installs it (doc/source/reference/deployments.rst): a wheel,
    # into nova's venv, with the series' upper-constraints (os_nova's
    # nova_user_pip_packages go through the venv build with them), its
    # own requirements resolved there, nothing built. Installed again when
    # its source or its version changed (the version is the commit's:
    # RELEASES, tools/releases.py; uninstalled first, as a dev version
    # can go down), and then running nova-computes restart.
    local sum wheels=$CACHE/wheels
    sum=$(cd "$top" && { find nova_pinning_hooks setup.cfg setup.py requirements.txt \
          RELEASES -type f \( -name '*.py' -o -name 'setup.*' -o -name '*.txt' \
          -o -name RELEASES \) | sort | xargs sha256sum
          git rev-parse HEAD 2>/dev/null || true; } | sha256sum)
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
