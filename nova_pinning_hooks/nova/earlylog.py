"""Log records written before nova set up logging, kept until it has.

nova-compute builds its notification drivers, and so activates the
package, inside ``nova.config.parse_args``; only then does it call
``oslo_log.log.setup``. Until that call the root logger's level is
WARNING and its only handler, if any, is oslo.log's provisional one on
stderr: the activation lines operators are told to look for (the
overcommit file written, the methods hooked) would be dropped, and
warnings would reach stderr but never the log file. ``hold()`` keeps
the package's records from then on; ``release()`` hands them to the
handlers once nova's logging has some. It is called by a watcher
thread that ``hold()`` starts (it checks every ``POLL`` seconds, for at
most ``WATCH`` seconds) and by the hooks, so the lines are written
whether or not the package activated.

Invariants:

* held only while the package's INFO records would be lost: the root
  logger has no handler, or its level is above INFO (Python's WARNING
  default; oslo.log's ``register_options``, which nova calls first,
  adds a provisional stderr handler and leaves the level); a process
  that set up logging before activating us (nova's test frameworks) is
  logged to directly, nothing held;
* "logging is set up" means the root logger has a handler it did not
  have when holding began: oslo.log's ``setup`` removes the root
  handlers and adds at least one (file, stderr, journal or stdout);
* records keep their own time, level and logger, and are replayed only
  at the levels the configured logging lets through; while held they go
  nowhere else, but warnings and errors, which go at once where they
  went before (the provisional handler, or Python's last resort on
  stderr), and not there again on release;
* bounded: at most ``LIMIT`` records are kept (the first ones: the
  activation lines); the count of those dropped is logged on release;
* the package logger's level is DEBUG, and it does not propagate, only
  while holding; both are given back on release (the level unless
  logging's set-up changed it meanwhile);
* never raises: a failure here loses log lines, never nova's operation.
"""

import logging
import threading
import time
import typing

PACKAGE = 'nova_pinning_hooks'
LIMIT = 500
POLL = 0.2
WATCH = 600.0

_LOCK = threading.Lock()
_HOLDER: typing.Optional['_Holder'] = None


class _Holder(logging.Handler):
    """Keeps the records of the package's loggers, in order; passes
    warnings and errors on at once to what the root logger has then."""

    def __init__(self, saved: tuple[int, bool],
                 root_handlers: list[logging.Handler]) -> None:
        super().__init__(logging.DEBUG)
        self.saved = saved  # the package logger's (level, propagate)
        self.root_handlers = root_handlers  # those before the set-up
        self.records: list[logging.LogRecord] = []
        self.dropped = 0
        self.released = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) < LIMIT:
            self.records.append(record)
        else:
            self.dropped += 1
        if record.levelno >= logging.WARNING:
            _write(record, self.root_handlers or [logging.lastResort])


def _write(record: logging.LogRecord,
           handlers: typing.Iterable[typing.Optional[logging.Handler]]
           ) -> None:
    for handler in handlers:
        if handler is not None and record.levelno >= handler.level:
            handler.handle(record)


def _handlers(name: str, exclude: typing.Container[logging.Handler]
              ) -> list[logging.Handler]:
    """The handlers a record of logger ``name`` goes to, but those in
    ``exclude``."""
    logger: typing.Optional[logging.Logger]
    found: list[logging.Handler]
    logger, found = logging.getLogger(name), []
    while logger is not None:
        found += [h for h in logger.handlers if h not in exclude]
        if not logger.propagate:
            break
        logger = logger.parent
    return found


def lost_at_info() -> bool:
    """True while an INFO record would reach no configured handler."""
    root = logging.getLogger()
    return not root.handlers or root.level > logging.INFO


def _set_up(holder: _Holder) -> bool:
    return any(h not in holder.root_handlers
               for h in logging.getLogger().handlers)


def hold() -> bool:
    """Keep the package's records until logging is set up (nothing when
    it already is, or records are already held). True when holding."""
    global _HOLDER
    try:
        with _LOCK:
            if _HOLDER is not None:
                return True
            if not lost_at_info():
                return False
            logger = logging.getLogger(PACKAGE)
            _HOLDER = _Holder((logger.level, logger.propagate),
                              list(logging.getLogger().handlers))
            logger.addHandler(_HOLDER)
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
            holder = _HOLDER
        threading.Thread(target=_watch, args=(holder,),
                         name='nova-pinning-earlylog', daemon=True).start()
        return True
    except Exception:
        return False


def _watch(holder: _Holder) -> None:
    # Under eventlet this is a green thread and the event a green one.
    deadline = time.monotonic() + WATCH
    while not holder.released.wait(POLL):
        release(force=time.monotonic() >= deadline)


def holding() -> bool:
    return _HOLDER is not None


def release(force: bool = False) -> int:
    """Once logging is set up (or with ``force``), stop holding and
    write the held records through the configured handlers. Cheap when
    nothing is held. Returns how many records were written."""
    global _HOLDER
    if _HOLDER is None:
        return 0
    try:
        with _LOCK:
            holder = _HOLDER
            if holder is None or not (force or _set_up(holder)):
                return 0
            _HOLDER = None
            holder.released.set()
            logger = logging.getLogger(PACKAGE)
            logger.removeHandler(holder)
            if logger.level == logging.DEBUG:  # ours, not a set-up's
                logger.setLevel(holder.saved[0])
            logger.propagate = holder.saved[1]
        # Not again to the handlers that had the warnings at once.
        exclude = set(holder.root_handlers)
        written = 0
        for record in holder.records:
            if logging.getLogger(record.name).isEnabledFor(record.levelno):
                _write(record, _handlers(record.name, exclude))
                written += 1
        if holder.dropped:
            logger.warning('nova-pinning-hooks: %d log records from before '
                           'logging was set up were dropped (kept the '
                           'first %d)', holder.dropped, LIMIT)
        return written
    except Exception:
        return 0
