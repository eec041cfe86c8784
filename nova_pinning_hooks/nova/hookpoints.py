"""Hook points on nova's ComputeManager, installed from configuration.

``install(cls, methods, hook_name)`` replaces each named method of
``cls`` by the same method wrapped with ``add_hook(hook_name)``: nova's
own ``nova.hooks.add_hook`` where it exists, else ours.

Invariants:

* the outermost function on the class is wrapped, so nova's decorators
  (wrap_exception, reverts_task_state, wrap_instance_fault, ...) still run
  inside, exactly as before; ``functools.wraps`` keeps the name, the
  docstring, ``__wrapped__`` and so ``inspect.signature``;
* idempotent: a method already wrapped for ``hook_name`` is left alone;
* a method the running nova lacks is skipped and logged, not an error.
"""

import typing

from oslo_log import log as logging

from nova_pinning_hooks.nova import hooks

LOG = logging.getLogger(__name__)
MARK = '_nova_pinning_hook'


def install(cls: type, methods: typing.Iterable[str], hook_name: str
            ) -> tuple[list[str], list[str], list[str]]:
    """Wrap ``methods`` of ``cls``; returns (wrapped, already, missing)."""
    nova_add_hook = hooks.nova_add_hook()
    wrapped: list[str] = []
    already: list[str] = []
    missing: list[str] = []
    for name in methods:
        # Through the MRO: a method may be defined on a base class; the
        # wrapper is set on ``cls`` itself.
        original = next((vars(k)[name] for k in cls.__mro__
                         if name in vars(k)), None)
        if original is None or not callable(original):
            missing.append(name)
            continue
        if getattr(original, MARK, None) == hook_name:
            already.append(name)
            continue
        new = (nova_add_hook(hook_name) if nova_add_hook else
               hooks.add_hook(hook_name, function_name=name))(original)
        setattr(new, MARK, hook_name)
        setattr(cls, name, new)
        wrapped.append(name)
    if missing:
        LOG.info('nova-pinning-hooks: %s has no %s; not hooked (this nova '
                 'release lacks them)', cls.__name__, ', '.join(missing))
    LOG.info('nova-pinning-hooks: hook %s runs after %s.%s', hook_name,
             cls.__name__, ', '.join(wrapped + already) or 'nothing')
    return wrapped, already, missing


def uninstall(cls: type, hook_name: str) -> None:
    """Undo ``install`` (tests, and switching off without a restart)."""
    for name, value in list(vars(cls).items()):
        if getattr(value, MARK, None) == hook_name:
            setattr(cls, name, value.__wrapped__)
