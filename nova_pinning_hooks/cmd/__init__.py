"""The commands: ``nova-pinning`` (``pinning``, ``live``) and
``nova-pinning-isolate`` (``isolate``), with what they share
(``common``).

Rule: the top layer, beside ``nova``: may import every layer below and
``conf``; never ``nova``.
"""
