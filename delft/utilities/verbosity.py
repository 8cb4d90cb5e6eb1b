"""What the library says while it works, and where: never on stdout (GROBID redirects its streams,
the CLIs write results there), on stderr through ``logging``.

In an interactive session (a terminal, or a notebook's kernel) where nobody configured logging,
training and evaluation show their progress as DeLFT does: epoch lines, the per-label report and
the progress bars, on stderr. Elsewhere (GROBID's JEP interpreter, a service, a batch job with its
stderr in a file) nothing is shown unless the host configures ``logging``. One switch sets it
either way: :func:`set_verbosity` (or ``DELFT_VERBOSITY``: ``quiet``, ``progress``).

>>> set_verbosity("quiet"); showing_progress()
False
>>> set_verbosity(None)
"""
import logging
import os
import sys
from typing import Optional

VERBOSITY_ENV = "DELFT_VERBOSITY"
LEVELS = ("quiet", "progress")
_LOGGER = logging.getLogger("delft")
QUIET_LEVEL = logging.CRITICAL + 1
_chosen: Optional[str] = None
_handler: Optional[logging.Handler] = None
_level_before_quiet: Optional[int] = None


def set_verbosity(level: Optional[str]):
    """``"quiet"``: nothing shown (no progress bars, epoch lines or reports, whatever the
    session); ``"progress"``: shown on stderr even when not interactive; None: the default (shown
    in interactive sessions where logging is not configured). Overrides ``DELFT_VERBOSITY``."""
    global _chosen
    if level is not None and level not in LEVELS:
        raise ValueError(f"verbosity must be one of {', '.join(LEVELS)} or None, not {level!r}")
    _chosen = level
    _apply()


def verbosity() -> Optional[str]:
    """The verbosity chosen by :func:`set_verbosity`, else ``DELFT_VERBOSITY``, else None."""
    if _chosen is not None:
        return _chosen
    value = os.environ.get(VERBOSITY_ENV, "").strip().lower()
    return value if value in LEVELS else None


def interactive() -> bool:
    """A terminal on stderr, or a notebook's kernel."""
    return sys.stderr.isatty() or "ipykernel" in sys.modules


def showing_progress() -> bool:
    """Whether progress bars are shown: in an interactive session, or when asked."""
    level = verbosity()
    return level == "progress" or (level is None and interactive())


def show_work():
    """Called as training or evaluation starts: in an interactive session where logging is not
    configured (or with verbosity ``progress``), delft's notices go to stderr; ``quiet`` mutes
    them."""
    _apply()


def _host_configured_logging():
    return bool(logging.getLogger().handlers) or (bool(_LOGGER.handlers) and
                                                  _handler not in _LOGGER.handlers)


def _apply():
    global _handler, _level_before_quiet
    level = verbosity()
    # a level above every record, which delft's loggers inherit: quiet whatever the handlers
    if level == "quiet" and _level_before_quiet is None:
        _level_before_quiet = _LOGGER.level
        _LOGGER.setLevel(QUIET_LEVEL)
    elif level != "quiet" and _level_before_quiet is not None:
        _LOGGER.setLevel(_level_before_quiet)
        _level_before_quiet = None
    wanted = level == "progress" or (level is None and interactive() and
                                     not _host_configured_logging())
    if wanted and _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("%(message)s"))
        _LOGGER.addHandler(_handler)
        if _LOGGER.level == logging.NOTSET:
            _LOGGER.setLevel(logging.INFO)
    elif not wanted and _handler is not None:
        _LOGGER.removeHandler(_handler)
        _handler = None
