#!/bin/bash
# Upstream tempest (from PyPI) against tools/cloud.sh's cloud: its compute
# API tests that this cloud can run, with the package switched on and
# again switched off (tools/cloud.sh package on|off).
#
#   tools/cloud-tempest.sh smoke [on|off|both]  # tempest's smoke tests of
#                                               # tempest.api.compute
#   tools/cloud-tempest.sh full [on|off|both]   # tempest.api.compute's
#                                               # servers, actions and admin
#                                               # migration tests
#
# NPH_TEMPEST_CONCURRENCY=N runs N tempest workers (1 by default).
# Each run prints tempest's own totals and leaves its subunit stream and
# log under /var/lib/nph-cloud/tempest/<set>-<on|off>/. The cloud has no
# network (guests boot with networks none), no volume service, no
# console: tempest is configured to skip what needs them.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
set_=${1:-smoke}
which=${2:-both}
CACHE=/var/cache/nova-pinning-hooks/cloud
STATE=${NPH_CLOUD_STATE:-/var/lib/nph-cloud}  # as tools/cloud.sh
PASS=nph-cloud-secret  # tools/cloud.sh's, loopback only
venv=$CACHE/tempest-venv

die() { echo "cloud-tempest.sh: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run me as root"
case "$set_" in smoke|full) ;; *) die "the set is smoke or full, not '$set_'" ;; esac
case "$which" in on|off|both) ;; *) die "on, off or both, not '$which'" ;; esac
[ -f "$STATE/cloud.json" ] || die "no cloud: tools/cloud.sh up first"

if [ ! -x "$venv/bin/tempest" ]; then
    echo "cloud-tempest: building $venv (once)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --log "$STATE/tempest-pip.log" tempest >/dev/null 2>&1 \
        || die "cannot install tempest (see $STATE/tempest-pip.log)"
fi

ids() { python3 -c "import json,sys; d=json.load(open('$STATE/cloud.json')); print(eval(sys.argv[1]))" "$1"; }

# What "the compute API tests this cloud can run" means: the servers,
# server actions and admin migration tests; smoke: tempest's smoke tag.
case "$set_" in
    smoke) select=(--regex '^tempest\.api\.compute\..*[\[,]smoke[\],]') ;;
    full) select=(--regex '^tempest\.api\.compute\.(servers|admin\.test_(live_)?migrations|admin\.test_servers)') ;;
esac

run_one() {  # on|off
    local mode=$1 ws=$STATE/tempest/$set_-$1
    "$top/tools/cloud.sh" package "$mode" >/dev/null
    rm -rf "$ws"
    mkdir -p "$STATE/tempest"
    # tempest remembers workspaces by name (~/.tempest): forget the last.
    "$venv/bin/tempest" workspace remove --name "$set_-$mode" >/dev/null 2>&1 || true  # none yet
    "$venv/bin/tempest" init --name "$set_-$mode" "$ws" > "$STATE/tempest/init-$set_-$mode.log" 2>&1 \
        || { echo "cloud-tempest.sh: tempest init failed" >&2; return 1; }
    cat > "$ws/etc/tempest.conf" <<EOF
[DEFAULT]
log_file = $ws/tempest.log
[auth]
admin_username = admin
admin_password = $PASS
admin_project_name = admin
admin_domain_name = Default
use_dynamic_credentials = true
create_isolated_networks = false
[identity]
uri_v3 = http://127.0.0.1:5000/v3
auth_version = v3
region = RegionOne
[identity-feature-enabled]
api_v2 = false
[compute]
image_ref = $(ids "d['image']")
image_ref_alt = $(ids "d['image']")
flavor_ref = $(ids "d['flavors']['nph.1']")
flavor_ref_alt = $(ids "d['flavors']['nph.1b']")
min_compute_nodes = 2
min_microversion = 2.1
max_microversion = latest
build_timeout = 180
region = RegionOne
[compute-feature-enabled]
resize = true
cold_migration = true
live_migration = true
# One instances_path shared by both computes: no block migration.
block_migration_for_live_migration = false
live_migrate_back_and_forth = true
vnc_console = false
spice_console = false
serial_console = false
console_output = false
rescue = true
shelve = true
shelve_migrate = false
suspend = true
pause = true
change_password = false
interface_attach = false
snapshot = true
metadata_service = false
config_drive = false
attach_encrypted_volume = false
swap_volume = false
volume_multiattach = false
personality = false
hostname_fqdn_sanitization = true
[service_available]
cinder = false
neutron = true
glance = true
nova = true
swift = false
[network-feature-enabled]
floating_ips = false
port_security = false
[validation]
run_validation = false
EOF
    echo "=== tempest $set_, package $mode ==="
    local start rc=0
    start=$(date +%s)
    (cd "$ws" && TEMPEST_CONFIG_DIR=$ws/etc "$venv/bin/tempest" run "${select[@]}" \
        --concurrency "${NPH_TEMPEST_CONCURRENCY:-1}" \
        --exclude-list "$top/tools/tempest-exclude.txt" \
        --subunit > "$ws/run.subunit") || rc=$?
    "$venv/bin/subunit2pyunit" --no-passthrough < "$ws/run.subunit" \
        > "$ws/results.txt" 2>&1 || true  # failures: counted below
    "$venv/bin/python" - "$ws/run.subunit" "$mode" "$(( $(date +%s) - start ))" <<'PY'
import sys
import subunit, testtools
from testtools import StreamToDict
results = {}
def on_test(t):
    if t['id'].startswith('setUpClass') or 'tearDownClass' in t['id']:
        key = t['id']
    else:
        key = t['id'].split('[')[0]
    results[key] = t['status']
case = subunit.ByteStreamToStreamResult(open(sys.argv[1], 'rb'), non_subunit_name='stdout')
result = StreamToDict(on_test)
result.startTestRun(); case.run(result); result.stopTestRun()
counts = {}
for k, v in results.items():
    counts[v] = counts.get(v, 0) + 1
fails = sorted(k for k, v in results.items() if v == 'fail')
print('tempest %s: %d passed, %d failed, %d skipped (%s s)' % (
    sys.argv[2], counts.get('success', 0), counts.get('fail', 0),
    counts.get('skip', 0), sys.argv[3]))
for f in fails:
    print('  FAILED', f)
PY
    return $rc
}

status=0
case "$which" in
    on) run_one on || status=1 ;;
    off) run_one off || status=1 ;;
    both) run_one on || status=1; run_one off || status=1 ;;
esac
"$top/tools/cloud.sh" package on >/dev/null
exit $status
