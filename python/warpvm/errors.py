"""warpvm.Error: the library's one exception type (warpvm::Error), as Python sees it."""

from __future__ import annotations

from enum import Enum


class ErrorKind(str, Enum):
    """What kind of failure an Error reports: warpvm::ErrorKind's enumerators, by name."""

    invalid_config = "invalid_config"
    invalid_argument = "invalid_argument"
    out_of_memory = "out_of_memory"
    cuda = "cuda"
    index_out_of_range = "index_out_of_range"
    no_progress = "no_progress"
    no_device = "no_device"
    invalid_free = "invalid_free"


class Error(RuntimeError):
    """A warpvm::Error raised by the library: the message is its what(), `kind` its ErrorKind.

    Configuration values that Python checks before the library sees them (sizes) raise it too,
    with kind invalid_config.
    """

    kind: ErrorKind

    def __init__(self, message: str, kind: ErrorKind | str) -> None:
        super().__init__(message)
        self.kind = ErrorKind(kind)

    def __reduce__(self) -> tuple[type[Error], tuple[str, str]]:
        return type(self), (str(self), self.kind.value)
