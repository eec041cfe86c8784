# shellcheck shell=bash
# The supported nova releases for shell scripts, read from
# tools/nova-releases (the one list; its header says what each fact
# means). Source it:
#
#   . "$top/tools/nova-releases.sh"
#   nova_releases            # every series, oldest first, one a line
#   nova_oldest; nova_newest
#   nova_before N            # the series before N in the list (none: '')
#   nova_fact N KEY          # a fact's value ('' where N has none)
#   nova_has N FLAG          # true if N carries the flag or the fact
#   nova_with FLAG           # the series that carry it, oldest first
#   nova_pypi_version N      # nova's version from PyPI for series N
#   nova_pip N               # what pip installs for N's nova beside it
#
# Invariants: reads the list and nothing else, writes nothing, sets no
# shell option; a series not in the list is an error (status 2 and one
# line on stderr), never an empty answer taken for a release.
NOVA_RELEASES_FILE=${NOVA_RELEASES_FILE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/nova-releases}

_nova_lines() {  # the list's release lines, comments and blanks dropped
    sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$NOVA_RELEASES_FILE"
}

nova_releases() { _nova_lines | awk '{print $1}'; }
nova_oldest() { nova_releases | head -n 1; }
nova_newest() { nova_releases | tail -n 1; }

nova_before() {  # N
    nova_known "$1" || return 2
    nova_releases | awk -v n="$1" '$1 == n {print prev; exit} {prev = $1}'
}

nova_known() {  # N: true if N is a series of the list, else says so
    if ! nova_releases | grep -qx -- "$1"; then
        echo "nova-releases: no nova series '$1' in $NOVA_RELEASES_FILE" \
             "($(nova_releases | paste -sd ' '))" >&2
        return 2
    fi
}

nova_fact() {  # N KEY
    nova_known "$1" || return 2
    _nova_lines | awk -v n="$1" -v k="$2" '$1 == n {
        for (i = 2; i <= NF; i++) {
            if (index($i, k "=") == 1) { print substr($i, length(k) + 2); exit }
            if ($i == k) { print "yes"; exit }
        }
    }'
}

nova_has() { [ -n "$(nova_fact "$1" "$2")" ]; }  # N FLAG

nova_with() {  # FLAG
    local n
    for n in $(nova_releases); do
        if nova_has "$n" "$1"; then echo "$n"; fi
    done
}

nova_pypi_version() {  # N
    local v
    v=$(nova_fact "$1" nova) || return 2
    [ -n "$v" ] || { echo "nova-releases: series $1 has no nova=" >&2; return 2; }
    echo "$v"
}

nova_pip() {  # N: the extra requirements beside nova, one a word
    local p
    p=$(nova_fact "$1" pip) || return 2
    echo "${p//,/ }"
}
