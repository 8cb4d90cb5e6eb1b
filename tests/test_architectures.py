"""Every RNN architecture DeLFT users name trains, evaluates, saves, loads and tags: on one device
char-only and with word embeddings, and on 2 logical CPU replicas (DELFT_CPU_REPLICAS=2, in a
subprocess) with word embeddings, where a few training steps must also give the weights they give
on one device."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from architecture_checks import RNN_ARCHITECTURES, round_trip
from conftest import subprocess_env
from test_sequence_embeddings import registry  # noqa: F401  (the fixture)

REPO = Path(__file__).resolve().parents[1]
EXPECTED_PARTS = {  # DeLFT's stacks: char encoder, casing, features, word encoder, CRF
    "BidLSTM": ("CharEncoder", False, False, "BiLSTM", False),
    "BidLSTM_CRF": ("CharEncoder", False, False, "BiLSTM", True),
    "BidLSTM_ChainCRF": ("CharEncoder", False, False, "BiLSTM", True),
    "BidLSTM_CRF_FEATURES": ("CharEncoder", False, True, "BiLSTM", True),
    "BidLSTM_ChainCRF_FEATURES": ("CharEncoder", False, True, "BiLSTM", True),
    "BidLSTM_CNN": ("CharCNN", True, False, "BiLSTM", False),
    "BidLSTM_CNN_CRF": ("CharCNN", False, False, "BiLSTM", True),
    "BidGRU_CRF": ("CharEncoder", False, False, "BiGRU", True),
    "BidLSTM_CRF_CASING": ("CharEncoder", True, False, "BiLSTM", True),
}


def test_every_rnn_architecture_is_covered():
    assert sorted(EXPECTED_PARTS) == RNN_ARCHITECTURES


def check(record, name, embedding_size):
    assert record["architecture"] == name
    assert record["epochs"] == 2 and record["loss_finite"]
    assert record["support"] > 0 and 0.0 <= record["f1"] <= 1.0
    assert record["same_tags_after_load"] and record["tokens_kept"]
    assert record["word_embedding_size"] == embedding_size
    parts = record["parts"]
    assert (parts["char_encoder"], parts["casing"], parts["features"], parts["word_encoder"],
            parts["crf"]) == EXPECTED_PARTS[name]


@pytest.mark.parametrize("name", RNN_ARCHITECTURES)
def test_one_device_char_only(name, tmp_path):
    check(round_trip(name, tmp_path), name, 0)


@pytest.mark.parametrize("name", RNN_ARCHITECTURES)
def test_one_device_with_word_embeddings(name, tmp_path, registry):  # noqa: F811
    from test_sequence_embeddings import DIMENSION

    check(round_trip(name, tmp_path, embeddings_name="tiny-vectors"), name, DIMENSION)


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory):
    """The checks script on 2 logical CPU replicas, word embeddings from a small registry."""
    from test_sequence_embeddings import SAMPLE, write_vectors

    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file

    folder = tmp_path_factory.mktemp("two_replicas")
    x, _, _ = load_data_and_labels_crf_file(SAMPLE)
    words = sorted({t for seq in x[:100] for t in seq})[::2]
    source = write_vectors(folder / "words.vec", words)
    registry_path = folder / "registry.json"
    registry_path.write_text(json.dumps({"embedding-lmdb-path": str(folder / "db"), "embeddings": [
        {"name": "tiny-vectors", "path": str(source), "type": "glove", "format": "vec",
         "lang": "en"}]}))
    run = subprocess.run(
        [sys.executable, str(REPO / "tests" / "architecture_checks.py"), str(folder / "models"),
         "tiny-vectors"], capture_output=True, text=True, timeout=1800,
        env=subprocess_env(DELFT_CPU_REPLICAS=2, DELFT_RESOURCE_REGISTRY=registry_path))
    assert run.returncode == 0, run.stderr[-3000:]
    return {record["architecture"]: record for record in
            map(json.loads, (line for line in run.stdout.splitlines() if line.startswith("{")))}


@pytest.mark.parametrize("name", RNN_ARCHITECTURES)
def test_two_replicas_with_word_embeddings(name, two_replicas):
    from test_sequence_embeddings import DIMENSION

    record = two_replicas[name]
    check(record, name, DIMENSION)
    assert record["variable_type"] == "MirroredVariable"
    assert record["steps"]["moved"] > 1e-4  # training changed the weights: not vacuous
    assert record["steps"]["relative_difference"] < 1e-4
