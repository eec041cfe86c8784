"""What the functional and cloud tests expect of the machine they run on,
said in one line when it differs (rather than as a wrong pin somewhere).

Their expected pins are written for this project's machines: exactly two
online CPUs, 0 and 1 (the whole host is ``0-1``; the cloud's second
compute gives CPU 1 to nova's dedicated guests and CPU 0 to the rest).
"""

EXPECTED_CPUS = '0-1'


def cpus_unlike_tests(online='/sys/devices/system/cpu/online'):
    """None, or why this machine's CPUs are not the tests' (one line)."""
    try:
        with open(online) as f:
            have = f.read().strip()
    except OSError as exc:
        return 'cannot read the online CPUs (%s): %s' % (online, exc)
    if have != EXPECTED_CPUS:
        return ('these tests expect exactly 2 online CPUs (%s), as this '
                "project's machines have; this machine's are %s"
                % (EXPECTED_CPUS, have))
    return None
