"""The one setting that says where the shared data lives.

Tests and benchmarks read the real (GROBID / DeLFT) data through :func:`shared_data_dir`. It defaults
to ``../shared/data`` next to the repository and is overridden by the ``DELFT_SHARED_DATA``
environment variable.
"""
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA_ENV = "DELFT_SHARED_DATA"


def shared_data_dir() -> Path:
    return Path(os.environ.get(SHARED_DATA_ENV, REPO_ROOT.parent / "shared" / "data"))


def shared_data_file(*parts) -> Path:
    return shared_data_dir().joinpath(*parts)
