"""Fixtures every collected module sees, docstring examples included (``--doctest-modules``).

``tiny_checkpoint(model_type)`` in a docstring example is the directory of a tiny random Hugging
Face checkpoint (BERT, DistilBERT or RoBERTa), written once per session.
"""
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent / "tests"
sys.path.insert(0, str(TESTS))

# data files and scripts the tests run in subprocesses, not modules to import
collect_ignore = ["tests/data", "setup.py", "tests/multi_replica_checks.py", "tests/classifier_replica_checks.py"]


@pytest.fixture(autouse=True, scope="session")
def _docstring_fixtures(doctest_namespace, tmp_path_factory):
    from tiny_transformers import write_tiny_checkpoint

    written = {}

    def tiny_checkpoint(model_type="bert"):
        if model_type not in written:
            written[model_type] = write_tiny_checkpoint(
                model_type, str(tmp_path_factory.mktemp(f"tiny-{model_type}")))
        return written[model_type]

    doctest_namespace["tiny_checkpoint"] = tiny_checkpoint
