"""nova's hook mechanism, as ``nova/hooks.py`` had it before Nova 22.

A hook is an object registered under the stevedore namespace
``nova.hooks`` with optional ``pre(*args, **kwargs)`` and
``post(rv, *args, **kwargs)`` methods; ``add_hook(name)`` decorates a
function so that the hooks named ``name`` run before and after it.

Semantics (kept from nova):

* ``pre`` hooks run before the function, ``post`` hooks after it returned
  (not when it raised), with its return value first;
* a hook raising ``FatalHookException`` stops the call: the exception
  reaches the caller; any other exception is logged and ignored;
* the function's return value and exceptions are never changed; the
  wrapper's frame in the traceback of the function's own exception says
  that it is the function's (``hooked_nova_method``, "nova's own code
  raised, not a hook").

Where nova still has ``nova.hooks`` (Nova 21 and older), its own
``add_hook`` and ``FatalHookException`` are used instead of these.
"""

import functools
import threading
import typing

from oslo_log import log as logging
import stevedore

LOG = logging.getLogger(__name__)
NAMESPACE = 'nova.hooks'


class FatalHookException(Exception):
    """A hook failed in a way that must stop the hooked operation."""


class HookManager(stevedore.hook.HookManager):
    """The hooks registered under one name, loaded once."""

    def __init__(self, name: str) -> None:
        super().__init__(NAMESPACE, name, invoke_on_load=True)

    def _run(self, name: str, method_type: str,
             args: tuple[typing.Any, ...],
             kwargs: dict[str, typing.Any]) -> None:
        for ext in self.extensions:
            hook = getattr(ext.obj, method_type, None)
            if hook is None:
                continue
            try:
                hook(*args, **kwargs)
            except FatalHookException:
                raise
            except Exception:
                LOG.exception('%s hook %s failed; ignored', method_type,
                              name)

    def run_pre(self, name: str, args: tuple[typing.Any, ...],
                kwargs: dict[str, typing.Any]) -> None:
        self._run(name, 'pre', args, kwargs)

    def run_post(self, name: str, rv: typing.Any,
                 args: tuple[typing.Any, ...],
                 kwargs: dict[str, typing.Any]) -> None:
        self._run(name, 'post', (rv,) + tuple(args), kwargs)


_MANAGERS: dict[str, HookManager] = {}


def manager(name: str) -> HookManager:
    """The (cached) HookManager of ``name``."""
    mgr = _MANAGERS.get(name)
    if mgr is None:
        mgr = _MANAGERS[name] = HookManager(name)
    return mgr


def reset() -> None:
    """Forget loaded hooks (tests)."""
    _MANAGERS.clear()


_CALL = threading.local()


def current_function() -> typing.Optional[str]:
    """The name of the hooked function whose hooks run now (on this
    thread), for hooks that want to say why they ran; None outside."""
    return getattr(_CALL, 'name', None)


def add_hook(name: str, function_name: typing.Optional[str] = None
             ) -> typing.Callable[[typing.Callable[..., typing.Any]],
                                  typing.Callable[..., typing.Any]]:
    """Decorator: run the ``name`` hooks around the function.
    ``function_name``: what ``current_function`` says while they run (the
    attribute the function is hooked as; nova's decorators do not all
    keep ``__name__``)."""
    def outer(func: typing.Callable[..., typing.Any]
              ) -> typing.Callable[..., typing.Any]:
        called = function_name or func.__name__

        # This frame is the outermost of every hooked nova method, so it
        # is in the traceback of each of nova's own failures: its name
        # and the line of the call (with its comment: a traceback prints
        # the whole source line) say whose failure that is. The
        # exception itself passes untouched: no re-raise, no frame cut
        # from its traceback.
        @functools.wraps(func)
        def hooked_nova_method(*args: typing.Any,
                               **kwargs: typing.Any) -> typing.Any:
            mgr = manager(name)
            outer_name, _CALL.name = current_function(), called
            try:
                mgr.run_pre(name, args, kwargs)
            finally:
                _CALL.name = outer_name
            rv = func(*args, **kwargs)  # nova's own code raised, not a hook
            _CALL.name = called
            try:
                mgr.run_post(name, rv, args, kwargs)
            finally:
                _CALL.name = outer_name
            return rv
        return hooked_nova_method
    return outer


def nova_add_hook() -> typing.Optional[typing.Callable[..., typing.Any]]:
    """nova's own ``add_hook`` where nova still has it, else None."""
    try:
        from nova import hooks as nova_hooks
    except ImportError:
        return None
    return getattr(nova_hooks, 'add_hook', None)
