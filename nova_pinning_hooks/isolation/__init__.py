"""Keeping host processes off the guests' CPUs (``nova-pinning-isolate``).

* ``procfs``: which processes exist, and which may be moved;
* ``backends``: cgroup v1 cpuset group, or systemd ``AllowedCPUs=``;
* ``pidwatch``: following daemon restarts through pid files (inotify);
* ``agent``: validate, apply, watch, undo, status.
"""


def status(conf):
    """The isolation state for ``nova-pinning status`` (a dict)."""
    from nova_pinning_hooks.isolation import agent
    try:
        iso = agent.Isolator(conf)
    except agent.ConfigError as exc:
        return {'state': 'not configured', 'why': str(exc)}
    result = iso.status()
    state = iso.load_state()
    result['state'] = 'applied' if state.get('mode') else 'not applied'
    result['recorded_moves'] = len(state.get('moved', {}))
    return result
