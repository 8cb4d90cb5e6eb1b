"""Errors a user sees as one readable line instead of a traceback."""
import errno


class DelftError(Exception):
    """Base class of every error delft reports to its users."""


class DataFormatError(DelftError, ValueError):
    """Malformed input data. The message names the file and the line: ``path:line: reason``."""

    def __init__(self, source, line_number, reason):
        self.source = source
        self.line_number = line_number
        self.reason = reason
        where = f"{source}:{line_number}" if line_number is not None else f"{source}"
        super().__init__(f"{where}: {reason}")


class ModelLoadError(DelftError):
    """A model directory that is missing, incomplete or corrupt."""


class ConfigurationError(DelftError, ValueError):
    """An option or combination of options that cannot work (unknown architecture, bad path...)."""


class DiskFullError(DelftError, OSError):
    """A write that ran out of space (or quota); what it was replacing is kept as it was.

    An OSError (errno ENOSPC) for callers that catch those; its text is the one line alone."""

    def __str__(self):
        return self.strerror


def is_disk_full(error):
    """Whether ``error`` (an OSError, or TensorFlow's error from a file it writes) says the device
    or the user's quota is full.

    >>> import errno
    >>> is_disk_full(OSError(errno.ENOSPC, "No space left on device")), is_disk_full(OSError(2, "x"))
    (True, False)
    """
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return any(text in str(error) for text in ("No space left on device", "Disk quota exceeded"))


def disk_full(path, kept):
    """The :class:`DiskFullError` of a write to ``path`` that did not fit; ``kept`` says what was
    left as it was."""
    return DiskFullError(errno.ENOSPC, f"{path}: no space left on the device; {kept}")
