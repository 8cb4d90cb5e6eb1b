"""Transformer names as users write them (``allenai/scibert_scivocab_cased``), found in
huggingface_hub's cache: a cache this test lays out as huggingface_hub writes it
(``models--org--name/refs/main``, ``snapshots/<commit>/`` links into ``blobs/``) with tiny BERT
checkpoints under the names of SciBERT, LinkBERT and BioBERT (BERT models all three), with every
socket refused: a model trains and tags from the cache with the network unused; a name the cache
lacks is one line saying where delft looked and what to set, at once when offline or without
network. The download itself runs against a stand-in for the hub.
"""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import delft  # noqa: E402,F401  (configures devices before TensorFlow starts)
from conftest import subprocess_env  # noqa: E402
from tiny_transformers import write_tiny_checkpoint  # noqa: E402

from delft.sequenceLabelling.transformers import hub  # noqa: E402
from delft.sequenceLabelling.transformers.checkpoint import resolve_transformer  # noqa: E402
from delft.utilities.errors import ConfigurationError  # noqa: E402

BERT_NAMES = ("allenai/scibert_scivocab_cased", "michiyasunaga/LinkBERT-base",
              "dmis-lab/biobert-base-cased-v1.2")
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def lay_out_hub_cache(cache, repo_id, source, commit=COMMIT):
    """``source``'s files in huggingface_hub's cache layout under ``cache``; the snapshot folder.

    Files are stored once in ``blobs/`` (named by their sha256, as LFS files are), the snapshot
    holds relative links to them, ``refs/main`` the commit (no newline, as huggingface_hub writes
    it)."""
    repo = os.path.join(cache, "models--" + repo_id.replace("/", "--"))
    snapshot = os.path.join(repo, "snapshots", commit)
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    os.makedirs(snapshot, exist_ok=True)
    for name in sorted(os.listdir(source)):
        with open(os.path.join(source, name), "rb") as stream:
            content = stream.read()
        blob = hashlib.sha256(content).hexdigest()
        with open(os.path.join(repo, "blobs", blob), "wb") as out:
            out.write(content)
        os.symlink(os.path.join("..", "..", "blobs", blob), os.path.join(snapshot, name))
    with open(os.path.join(repo, "refs", "main"), "w") as out:
        out.write(commit)
    return snapshot


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return write_tiny_checkpoint("bert", str(tmp_path_factory.mktemp("tiny") / "bert"))


@pytest.fixture
def hub_cache(tmp_path, tiny_bert, monkeypatch):
    """huggingface_hub pointed at a fresh cache holding the three BERT names (online mode)."""
    from huggingface_hub import constants

    cache = str(tmp_path / "hf" / "hub")
    for name in BERT_NAMES:
        lay_out_hub_cache(cache, name, tiny_bert)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", cache)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return cache


@pytest.fixture
def no_network(monkeypatch):
    """Every connection and name lookup refused; the attempts, as a list."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args[:2])
        raise OSError("network refused by the test")

    for owner, name in ((socket, "getaddrinfo"), (socket, "create_connection"),
                        (socket.socket, "connect"), (socket.socket, "connect_ex")):
        monkeypatch.setattr(owner, name, refuse)
    return attempts


def test_cached_names_resolve_from_the_cache_without_the_network(hub_cache, no_network):
    for name in BERT_NAMES:
        path = resolve_transformer(name)
        assert path == os.path.join(hub_cache, "models--" + name.replace("/", "--"),
                                    "snapshots", COMMIT)
        assert os.path.isfile(os.path.join(path, "model.safetensors"))
    assert no_network == []  # a complete snapshot is used as it is, online too


def test_offline_name_the_cache_lacks_is_one_line(hub_cache, no_network, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConfigurationError) as error:
        resolve_transformer("allenai/scibert_scivocab_uncased")
    message = str(error.value)
    assert "\n" not in message and "'allenai/scibert_scivocab_uncased'" in message
    assert "no such checkpoint directory" in message and "registered" in message
    assert hub_cache in message and "HF_HUB_OFFLINE=1" in message
    assert "HF_HUB_CACHE" in message and "HF_HOME" in message
    assert no_network == []


def test_without_network_a_missing_name_fails_at_once_in_one_line(hub_cache, no_network):
    start = time.monotonic()
    with pytest.raises(ConfigurationError) as error:
        resolve_transformer("allenai/scibert_scivocab_uncased")
    assert time.monotonic() - start < 5
    message = str(error.value)
    assert "\n" not in message and hub_cache in message
    assert "not downloadable from https://huggingface.co" in message and "refused" in message
    assert no_network  # it did try, once online


def test_an_incomplete_snapshot_is_named_with_what_it_lacks(hub_cache, tmp_path, tiny_bert,
                                                            monkeypatch):
    from huggingface_hub import constants

    partial = str(tmp_path / "partial")
    os.makedirs(partial)
    shutil.copy(os.path.join(tiny_bert, "config.json"), partial)  # as AutoConfig leaves it
    snapshot = lay_out_hub_cache(hub_cache, "org/partial", partial)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConfigurationError, match="lacks model.safetensors, tokenizer files") as \
            error:
        resolve_transformer("org/partial")
    assert snapshot in str(error.value)


def test_a_local_directory_comes_before_the_hub(hub_cache, tmp_path, tiny_bert, monkeypatch):
    local = tmp_path / "allenai" / "scibert_scivocab_cased"
    shutil.copytree(tiny_bert, local)
    monkeypatch.chdir(tmp_path)
    path = resolve_transformer("allenai/scibert_scivocab_cased")
    assert os.path.realpath(path) == os.path.realpath(local)


# -- the download, against a stand-in for the hub ------------------------------------------------
class StandInHub:
    """``HfApi.model_info`` and ``hf_hub_download`` of a hub holding ``files`` (name -> source
    path) for every model: downloads land in the cache's layout, requests are recorded."""

    def __init__(self, cache, files):
        self.cache, self.files, self.requests = cache, files, []

    def model_info(self, name, timeout=None):
        self.requests.append(("model_info", name, timeout))
        return types.SimpleNamespace(siblings=[types.SimpleNamespace(rfilename=f)
                                               for f in sorted(self.files)])

    def hf_hub_download(self, name, filename, etag_timeout=None):
        self.requests.append((filename, etag_timeout))
        folder = os.path.join(self.cache, "models--" + name.replace("/", "--"), "snapshots",
                              COMMIT)
        os.makedirs(folder, exist_ok=True)
        shutil.copy(self.files[filename], os.path.join(folder, filename))
        return os.path.join(folder, filename)


def stand_in_hub(monkeypatch, cache, files):
    import huggingface_hub

    stand_in = StandInHub(cache, files)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", stand_in.model_info)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", stand_in.hf_hub_download)
    return stand_in


def test_download_fetches_only_what_delft_reads_with_timeouts(hub_cache, tiny_bert, tmp_path,
                                                              monkeypatch):
    files = {name: os.path.join(tiny_bert, name) for name in os.listdir(tiny_bert)}
    torch_weights = tmp_path / "pytorch_model.bin"
    torch_weights.write_bytes(b"not read")
    files["pytorch_model.bin"] = str(torch_weights)
    stand_in = stand_in_hub(monkeypatch, hub_cache, files)
    path = resolve_transformer("google-bert/bert-base-cased")
    assert os.path.isfile(os.path.join(path, "model.safetensors"))
    fetched = [request[0] for request in stand_in.requests[1:]]
    assert fetched[:2] == ["config.json", "model.safetensors"]
    assert "pytorch_model.bin" not in fetched and "vocab.txt" in fetched
    assert stand_in.requests[0] == ("model_info", "google-bert/bert-base-cased",
                                    hub.HUB_TIMEOUT)
    assert all(timeout == hub.HUB_TIMEOUT for _, timeout in stand_in.requests[1:])


def test_a_hub_model_without_safetensors_is_refused_in_one_line(hub_cache, tiny_bert, tmp_path,
                                                                monkeypatch):
    torch_weights = tmp_path / "pytorch_model.bin"
    torch_weights.write_bytes(b"not read")
    files = {"config.json": os.path.join(tiny_bert, "config.json"),
             "vocab.txt": os.path.join(tiny_bert, "vocab.txt"),
             "pytorch_model.bin": str(torch_weights)}
    stand_in = stand_in_hub(monkeypatch, hub_cache, files)
    with pytest.raises(ConfigurationError) as error:
        resolve_transformer("org/old-bert")
    message = str(error.value)
    assert "\n" not in message and "no safetensors weights" in message
    assert "pytorch_model.bin" in message
    assert [r[0] for r in stand_in.requests] == ["model_info"]  # nothing downloaded


# -- a model trained and tagged from the cache, network refused -----------------------------------
OFFLINE_SCRIPT = """
import json, socket, sys
attempts = []
def refuse(*args, **kwargs):
    attempts.append(repr(args[:2]))
    raise OSError("network refused by the test")
socket.getaddrinfo = socket.create_connection = refuse
socket.socket.connect = socket.socket.connect_ex = refuse
sys.path.insert(0, {tests!r})
from test_transformer import date_like
from delft.sequenceLabelling import Sequence

x, y, _ = date_like(12)
model = Sequence("tiny", architecture="BERT_CRF", transformer_name={name!r}, max_epoch=1,
                 batch_size=6, learning_rate=1e-3)
model.train(x, y)
tagged = model.tag(x[:3])
model.save({models!r})
print("RESULT " + json.dumps({{"dir": model.p.transformer_dir, "attempts": attempts,
                              "tagged": [[t for t, _ in s] for s in tagged]}}))
"""


def test_a_model_trains_and_tags_from_the_hub_cache_offline(tmp_path, tiny_bert):
    from test_transformer import date_like

    home = tmp_path / "hf"
    snapshot = lay_out_hub_cache(str(home / "hub"), BERT_NAMES[0], tiny_bert)
    script = OFFLINE_SCRIPT.format(tests=HERE, name=BERT_NAMES[0], models=str(tmp_path / "m"))
    env = subprocess_env(HF_HUB_OFFLINE=1, HF_HOME=home)
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE"):
        env.pop(variable, None)
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["attempts"] == []
    assert os.path.realpath(out["dir"]) == os.path.realpath(snapshot)
    assert out["tagged"] == date_like(12)[0][:3]
    saved = json.loads((tmp_path / "m" / "tiny" / "preprocessor.json").read_text())
    assert saved["transformer_name"] == BERT_NAMES[0]
