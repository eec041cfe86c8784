# shellcheck shell=bash
# tools/cloud.sh's part: the package's switches in nova's configuration,
# written anew by "up", "package on|off|disabled" and "weigher on|off".
# Sourced, never run. Invariant: each switch is also kept in the state
# directory (package, weigher), which "status" reads.
# shellcheck disable=SC2154  # the globals: tools/cloud.sh sets them

# The operator's switch (doc/source/admin/nova.rst), beside the notification
# driver a cloud whose other services consume nova's notifications has
# (doc/source/reference/deployments.rst: kolla-ansible writes messagingv2 then): both
# lines, so that nova's notifications keep flowing while the package is
# on (tests/cloud/test_notifications.py); off removes ours only.
write_package_conf() {
    local i
    for i in 1 2; do
        {
            echo "[oslo_messaging_notifications]"
            echo "driver = messagingv2"
            if [ "$package" != off ]; then echo "driver = nova_pinning"; fi
            # Switched off the way doc/source/admin/nova.rst says: loaded, only
            # the filter that keeps its pins out of migration and
            # unrescue XML.
            if [ "$package" = disabled ]; then
                printf '[nova_pinning]\nenabled = false\n'
            fi
        } > "$etc/nova/pinning$i.conf"
    done
    echo "$package" > "$STATE/package"
}

# nova-scheduler's weighers (doc/source/reference/nova-integration.rst, "Across the cloud"): on,
# nova's own and the package's OneToOneWeigher, on one line (a list
# option: a second line would replace the first); off, nova's default.
# It follows the package (an operator installs both), and "cloud.sh
# weigher on|off" switches it alone (tests/cloud/test_weigher.py).
write_weigher_conf() {  # on|off
    {
        echo "# cloud.sh weigher $1"
        if [ "$1" = on ]; then
            echo "[filter_scheduler]"
            echo "weight_classes = nova.scheduler.weights.all_weighers,nova_pinning_hooks.nova.weigher.OneToOneWeigher"
        fi
    } > "$etc/nova/scheduler.conf"
    echo "$1" > "$STATE/weigher"
}
