"""Errors a user sees as one readable line instead of a traceback."""


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
