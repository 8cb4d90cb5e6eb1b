"""Shared fixtures: the date corpus, ONE small trained model per session, subprocess helpers.

The session model is trained once (``trained_date``) on the real GROBID date data when
``../shared/data`` has it, else on the sample shipped in ``data/`` (tests that need the real data
itself skip with a reason), and saved under a temporary models dir as ``date-BidLSTM_CRF/`` — the
layout GROBID loads. Tests that change a model load their own copy from that dir.
"""
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from delft.utilities.data_path import shared_data_file  # noqa: E402
from delft.utilities.native_logs import tensorflow_free  # noqa: E402

SAMPLE_DATE = REPO_ROOT / "data" / "sequenceLabelling" / "grobid" / "date" / "date-sample.train"
# GROBID's shipped DeLFT folders (a sample), with DeLFT 0.4.6's outputs under reference/
GROBID_MODELS = shared_data_file("grobid-models")
GROBID_MODELS_REFERENCE = GROBID_MODELS / "reference"
REAL_DATE = shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")
MODEL_NAME = "date-BidLSTM_CRF"

def delft_stderr_lines(stderr):
    """The non-empty stderr lines that are not TensorFlow's own runtime logging."""
    return tensorflow_free(stderr.splitlines())


def subprocess_env(**extra):
    """The environment of a child Python: this repository importable, TF quiet, extra variables."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PYTHONHASHSEED", "0")
    env.pop("DELFT_CPU_REPLICAS", None)
    env.update({key: str(value) for key, value in extra.items()})
    return env


def run_python(args, cwd=REPO_ROOT, timeout=300, **env):
    """Run ``sys.executable args...``; returns the CompletedProcess (text mode)."""
    return subprocess.run([sys.executable, *map(str, args)], cwd=str(cwd), env=subprocess_env(**env),
                          capture_output=True, text=True, timeout=timeout)


def unprivileged_command(command):
    """``command`` run so that file permissions apply to it: as root, without the capabilities that
    bypass them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), through util-linux's setpriv."""
    if os.geteuid() != 0:
        return list(command)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file permissions cannot be enforced")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", *command]


@pytest.fixture
def unprivileged(tmp_path):
    """Run Python code in a process that file permissions apply to; returns the CompletedProcess."""
    def run(code, timeout=120):
        script = tmp_path / "unprivileged.py"
        script.write_text(code)
        return subprocess.run(unprivileged_command([sys.executable, str(script)]),
                              cwd=str(tmp_path), env=subprocess_env(), capture_output=True,
                              text=True, timeout=timeout)
    return run


def crf_sequences(path, limit=None):
    """The sequences of a GROBID matrix file, each a list of its (stripped) lines."""
    sequences, current = [], []
    for line in Path(path).read_text(encoding="utf-8").split("\n"):
        if line.strip():
            current.append(line.strip())
        elif current:
            sequences.append(current)
            current = []
    if current:
        sequences.append(current)
    return sequences[:limit] if limit else sequences


def unlabelled_matrix(sequences):
    """A GROBID matrix as GROBID sends it for tagging: the label column removed."""
    return "\n\n".join("\n".join(line.rsplit(maxsplit=1)[0] for line in seq)
                       for seq in sequences) + "\n"


@pytest.fixture(scope="session")
def date_corpus_path():
    """The real date training data if present, else the shipped sample."""
    return REAL_DATE if REAL_DATE.is_file() else SAMPLE_DATE


@pytest.fixture(scope="session")
def real_date_path():
    if not REAL_DATE.is_file():
        pytest.skip(f"real GROBID date data absent ({REAL_DATE}); set DELFT_SHARED_DATA")
    return REAL_DATE


@pytest.fixture(scope="session")
def date_corpus(date_corpus_path):
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file

    return load_data_and_labels_crf_file(date_corpus_path)


@dataclass
class TrainedDate:
    model: object          # the Sequence, as trained (do not mutate)
    models_dir: Path       # holds MODEL_NAME/
    corpus_path: Path
    x_train: list
    y_train: list
    f_train: list
    x_valid: list
    y_valid: list
    f_valid: list
    x_eval: list
    y_eval: list
    f_eval: list

    @property
    def model_dir(self):
        return self.models_dir / MODEL_NAME

    def load(self):
        """A fresh Sequence loaded from the saved dir (safe to change)."""
        return loaded_sequence(MODEL_NAME, str(self.models_dir))


@pytest.fixture(scope="session")
def trained_date(tmp_path_factory, date_corpus, date_corpus_path):
    """The session's one trained model: 90/10 eval split then 90/10 validation, as train_eval."""
    from delft.applications.common import split
    from delft.sequenceLabelling import Sequence

    x, y, f = date_corpus
    (x, y, f), (x_eval, y_eval, f_eval) = split(x, y, f, 0.1, 1)
    (x_train, y_train, f_train), (x_valid, y_valid, f_valid) = split(x, y, f, 0.1, 1)
    model = Sequence(MODEL_NAME, max_epoch=8, batch_size=60, recurrent_dropout=0.0, seed=1,
                     max_sequence_length=50)
    model.train(x_train, y_train, x_valid=x_valid, y_valid=y_valid)
    models_dir = tmp_path_factory.mktemp("models")
    model.save(str(models_dir))
    return TrainedDate(model, models_dir, date_corpus_path, list(x_train), list(y_train),
                       list(f_train), list(x_valid), list(y_valid), list(f_valid), list(x_eval),
                       list(y_eval), list(f_eval))


@pytest.fixture(scope="session")
def loaded_date(trained_date):
    """One loaded copy shared by read-only tagging tests (tests must not change it)."""
    return trained_date.load()


def load_module(path):
    """The Python file ``path`` (a recording or data script outside the package), imported."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_within_reordering_floor(difference, floor):
    """A 1-vs-2 replica difference after one step, against the floor: one device's difference
    from itself with the batch's rows reversed.

    An adaptive first step (Adam, RMSprop) divides each gradient by its own size, so a component
    near epsilon that is a cancelling sum (a zero-initialised bias) magnifies float32 summation
    order: one device is not within 1e-5 of itself either (classifier ``gru``, initial seeds
    1-12: 1 vs 2 replicas 3.9e-7..1.05e-5, one device reversed 1.9e-7..1.0e-5). So 2 replicas
    must be within 1e-5 or within twice that floor, and the floor itself small.
    """
    assert floor < 1e-4, (difference, floor)
    assert difference <= max(1e-5, 2 * floor), (difference, floor)


def learning_rates(optimizer, steps):
    """The learning rate ``optimizer`` applies at each of ``steps``: its schedule's, or its
    constant rate."""
    rate = optimizer._learning_rate
    return [float(rate(step)) if callable(rate) else float(rate) for step in steps]


def loaded_sequence(name, dir_path, **kwargs):
    """``Sequence(name)`` loaded from ``dir_path`` (``load`` itself returns None, as DeLFT's)."""
    from delft.sequenceLabelling import Sequence

    model = Sequence(name)
    assert model.load(str(dir_path), **kwargs) is None
    return model


def labels_of(model, x, features=None, **options):
    """The labels ``model.tag`` gives the token lists ``x`` (and their ``features``)."""
    return [[label for _, label in pairs]
            for pairs in model.tag(x, None, features=features, **options)]


def token_accuracy(pairs_per_sequence, gold):
    total = sum(len(g) for g in gold)
    correct = sum(label == g for pairs, labels in zip(pairs_per_sequence, gold)
                  for (_, label), g in zip(pairs, labels))
    return correct / total


@contextlib.contextmanager
def registry_of(directory, name, vectors):
    """A registry naming the vectors file ``vectors`` ``name`` (its cache in ``directory``), set
    as ``DELFT_RESOURCE_REGISTRY`` for this process and its children, the cache built once
    before any child reads it; the previous setting restored after."""
    registry = Path(directory) / "registry.json"
    registry.write_text(json.dumps({
        "embedding-lmdb-path": str(Path(directory) / "db"),
        "embeddings": [{"name": name, "path": str(vectors), "type": "glove", "format": "vec",
                        "lang": "en", "item": "word"}]}))
    previous = os.environ.get("DELFT_RESOURCE_REGISTRY")
    os.environ["DELFT_RESOURCE_REGISTRY"] = str(registry)
    try:
        from delft.utilities.Embeddings import open_embeddings

        open_embeddings(name)
        yield registry
    finally:
        if previous is None:
            os.environ.pop("DELFT_RESOURCE_REGISTRY")
        else:
            os.environ["DELFT_RESOURCE_REGISTRY"] = previous


@pytest.fixture(scope="session")
def standin_registry(tmp_path_factory):
    """A registry naming the shared sample's glove-840B stand-in (``reference/synth_vec.py``: the
    vectors DeLFT 0.4.6's reference labels were made with)."""
    if not (GROBID_MODELS_REFERENCE / "synth_vec.py").is_file():
        pytest.skip(f"the shared sample of GROBID's models is absent: {GROBID_MODELS}")
    directory = tmp_path_factory.mktemp("glove_standin")
    vectors = directory / "glove-standin.vec"
    completed = run_python([GROBID_MODELS_REFERENCE / "synth_vec.py", shared_data_file(), vectors])
    assert completed.returncode == 0, completed.stderr
    with registry_of(directory, "glove-840B", vectors) as registry:
        yield registry


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def forced_collections(monkeypatch):
    """The calls made to ``gc.collect`` from now on (their arguments; none collects): what
    ``delft.training.prediction.serving_call`` forces."""
    import gc

    forced = []
    monkeypatch.setattr(gc, "collect", lambda *args: forced.append(args))
    return forced
