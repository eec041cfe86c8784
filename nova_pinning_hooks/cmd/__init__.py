"""The commands: ``nova-pinning`` (``pinning``, ``live``),
``nova-pinning-isolate`` (``isolate``) and ``nova-pinning-status``
(``status``, ``upgradecheck``: ``upgrade check``), with what they share
(``common``: errors, exit status, arguments, logging; ``confcheck``:
the configuration checks, which the upgrade check reports too).

Rule: the top layer, beside ``nova``: may import every layer below and
``conf``; never ``nova``.
"""
