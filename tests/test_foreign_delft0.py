"""GROBID's shipped DeLFT 0.3/0.4 folders (Keras 2) load as they are and tag as DeLFT 0.4.6 does.

The folders, their inputs and DeLFT 0.4.6's labels are the shared sample
(``../shared/data/grobid-models/``, its README): glove-840B is replaced by the sample's
deterministic stand-in (``reference/synth_vec.py``), registered under the same name, so the labels
are those of any faithful implementation. DeLFT 0.4.6's emissions on the first batch of each folder
are recorded beside this module (``data/delft046/``, with the script that recorded them).
"""
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import GROBID_MODELS as MODELS, GROBID_MODELS_REFERENCE as REFERENCE, REPO_ROOT, \
    labels_of, loaded_sequence, run_python
from delft.utilities.errors import ModelLoadError

FOLDERS = ("citation-BidLSTM_CRF", "date-BidLSTM_CRF", "date-BidLSTM_CRF_FEATURES",
           "header-BidLSTM_ChainCRF", "header-BidLSTM_ChainCRF_FEATURES",
           "name-citation-BidLSTM_CRF_FEATURES")
CHAIN_CRF = ("header-BidLSTM_ChainCRF", "header-BidLSTM_ChainCRF_FEATURES")
EMISSIONS = REPO_ROOT / "tests" / "data" / "delft046"
pytestmark = pytest.mark.skipif(not (REFERENCE / "synth_vec.py").is_file(),
                                reason=f"the shared sample of GROBID's models is absent: {MODELS}")


def inputs_of(folder):
    data = json.loads((REFERENCE / "inputs" / f"{folder}.json").read_text(encoding="utf-8"))
    return data["x"], data["f"]


def delft046_labels(folder):
    return json.loads((REFERENCE / "delft-0.4.6" / f"{folder}.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def loaded(standin_registry):
    return {folder: loaded_sequence(folder, MODELS) for folder in FOLDERS}


@pytest.mark.parametrize("folder", FOLDERS)
def test_labels_equal_delft_046(loaded, folder):
    """Every token of the 150 inputs, DeLFT 0.4.6's quirks included (the ChainCRF folders read
    their padding and predict ``<PAD>`` for many tokens of short texts in a batch of long ones)."""
    x, f = inputs_of(folder)
    labels = labels_of(loaded[folder], x, f)
    expected = delft046_labels(folder)
    assert [len(s) for s in labels] == [len(s) for s in x]
    wrong = sum(a != b for got, ref in zip(labels, expected) for a, b in zip(got, ref))
    assert wrong == 0, f"{wrong} of {sum(map(len, x))} tokens differ"
    assert len({label for seq in labels for label in seq}) >= 3  # not a constant output


def test_chain_crf_labels_depend_on_the_batch_as_in_delft(loaded):
    """The unmasked ChainCRF folders read their padding: DeLFT's batches (the config's batch size,
    input order) give DeLFT's labels; batches of one give others (GROBID sets 1 for the header)."""
    folder = "header-BidLSTM_ChainCRF"
    x, f = inputs_of(folder)
    model = loaded[folder]
    assert labels_of(model, x, f) == delft046_labels(folder)
    alone = labels_of(model, x, f, batch_size=1)
    assert alone != delft046_labels(folder)
    assert alone[:3] == [labels_of(model, [seq], f)[0] for seq in x[:3]]
    masked = loaded["date-BidLSTM_CRF"]
    x, f = inputs_of("date-BidLSTM_CRF")
    assert labels_of(masked, x, f, batch_size=1) == delft046_labels("date-BidLSTM_CRF")


def test_grobid_runtime_settings_are_honoured(loaded):
    """GROBID sets ``model_config.max_sequence_length`` and ``.batch_size`` after ``load``: the
    batch size is the tagging batch (the ChainCRF labels follow it); longer inputs are tagged
    whole."""
    folder = "header-BidLSTM_ChainCRF_FEATURES"
    x, f = inputs_of(folder)
    model = loaded_sequence(folder, MODELS)
    model.model_config.max_sequence_length = 3000
    model.model_config.batch_size = 1
    assert labels_of(model, x, f) == labels_of(loaded[folder], x, f, batch_size=1)
    model.model_config.max_sequence_length = 5
    longest = max(range(len(x)), key=lambda i: len(x[i]))
    assert len(model.tag([x[longest]], None, features=[f[longest]])[0]) == len(x[longest])


@pytest.mark.parametrize("folder", FOLDERS)
def test_emissions_within_1e4_of_delft_046(loaded, folder):
    """The potentials (the CRF's unary scores, before its start and end energies) of the first
    DeLFT batch, every position of the padded batch, against DeLFT 0.4.6's
    (tests/data/delft046/record_emissions.py)."""
    recorded = np.load(EMISSIONS / f"{folder}.npz")
    model = loaded[folder]
    x, f = inputs_of(folder)
    rows = int(recorded["batch_rows"])
    corpus = model.p.encode(x[:rows], f[:rows] if f else None)
    batch = model.p.padded_batch(corpus, np.arange(rows))
    theirs = recorded["emissions"]
    ours = model.model(batch, training=False).numpy()[:len(theirs)]
    lengths = recorded["lengths"]
    assert list(lengths) == [len(seq) for seq in x[:len(theirs)]]
    if folder in CHAIN_CRF:  # DeLFT reads the padding: compare it too
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)
    for row, length in enumerate(lengths):
        np.testing.assert_allclose(ours[row, :length], theirs[row, :length], atol=1e-4, rtol=0)


def test_two_replicas_give_the_same_labels(loaded, standin_registry, tmp_path):
    """On 2 logical CPU replicas a ChainCRF folder's batches are DeLFT's, each replica's slice
    padded as the whole batch: the labels are those of one device, at the config's batch size and
    at GROBID's batch size 1; a masked folder's too."""
    script = tmp_path / "two.py"
    script.write_text(
        "import json, sys\n"
        "from delft.sequenceLabelling import Sequence\n"
        "models, out, *specs = sys.argv[1:]\n"
        "result = {}\n"
        "for spec in specs:\n"
        "    folder, inputs, batch = spec.split(',')\n"
        "    data = json.load(open(inputs))\n"
        "    model = Sequence(folder)\n"
        "    model.load(dir_path=models, multi_gpu=True)\n"
        "    result[spec] = [[l for _, l in s] for s in model.tag(data['x'], None, "
        "features=data['f'], multi_gpu=True, batch_size=int(batch) or None)]\n"
        "json.dump(result, open(out, 'w'))\n")
    specs = {f"{folder},{REFERENCE / 'inputs' / (folder + '.json')},{batch}": (folder, batch)
             for folder, batch in (("header-BidLSTM_ChainCRF", 0),
                                   ("header-BidLSTM_ChainCRF_FEATURES", 1),
                                   ("name-citation-BidLSTM_CRF_FEATURES", 0))}
    out = tmp_path / "two.json"
    completed = run_python([script, MODELS, out, *specs], timeout=600, DELFT_CPU_REPLICAS=2,
                           DELFT_RESOURCE_REGISTRY=standin_registry)
    assert completed.returncode == 0, completed.stderr[-3000:]
    two = json.loads(out.read_text())
    for spec, (folder, batch) in specs.items():
        x, f = inputs_of(folder)
        assert two[spec] == labels_of(loaded[folder], x, f, batch_size=batch or None), folder
    assert two[next(iter(specs))] == delft046_labels("header-BidLSTM_ChainCRF")


def test_a_read_only_folder_loads_and_nothing_is_written(standin_registry, tmp_path, unprivileged):
    """``grobid-home`` may be a read-only mount: the folder and its parent read-only, the load and
    a tag call run where permissions apply, and nothing appears in them or in the working
    directory."""
    models = tmp_path / "models"
    shutil.copytree(MODELS / "date-BidLSTM_CRF_FEATURES", models / "date-BidLSTM_CRF_FEATURES")
    for path in [models, *models.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    x, f = inputs_of("date-BidLSTM_CRF_FEATURES")
    completed = unprivileged(
        "import json\n"
        "from delft.sequenceLabelling import Sequence\n"
        "model = Sequence('date-BidLSTM_CRF_FEATURES')\n"
        f"model.load(dir_path={str(models)!r})\n"
        f"print(json.dumps(model.tag({x[:5]!r}, None, features={f[:5]!r})))\n", timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    after = sorted(str(p) for p in tmp_path.rglob("*"))
    assert after == sorted(before + [str(tmp_path / "unprivileged.py")])
    tagged = json.loads(completed.stdout)
    assert [[label for _, label in s] for s in tagged] == \
        delft046_labels("date-BidLSTM_CRF_FEATURES")[:5]
    for path in [models, *models.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.mark.parametrize("folder", ["date-BidLSTM_CRF_FEATURES", "header-BidLSTM_ChainCRF"])
def test_incremental_training_from_a_shipped_folder_then_saved_reloads_identically(
        standin_registry, tmp_path, folder):
    """GROBID's incremental path: ``train(..., incremental=True)`` after loading a shipped folder,
    ``save`` writes our own format in another folder, and that folder tags as the model trained
    in memory did (the ChainCRF one keeps reading its padding)."""
    model = loaded_sequence(folder, MODELS)
    model.training_config.max_epoch = 1
    x, f = inputs_of(folder)
    y = delft046_labels(folder)
    y[0] = ["B-<unseen>"] + y[0][1:]  # a new label: the CRF grows
    model.train(x[:100], y[:100], f[:100] if f else None, incremental=True)
    assert "B-<unseen>" in model.p.label_vocabulary.labels
    in_memory = labels_of(model, x[100:], f[100:] if f else None)
    model.save(str(tmp_path))
    assert sorted(os.listdir(tmp_path / folder))[:3] == ["config.json", "history.json",
                                                         "model.weights.h5"]
    reloaded = loaded_sequence(folder, tmp_path)
    assert reloaded.p.reads_padding == (folder in CHAIN_CRF)
    assert labels_of(reloaded, x[100:], f[100:] if f else None) == in_memory


# ---- what is refused, in one line ----------------------------------------------------------------

def damaged_copy(tmp_path, folder, config=None, preprocessor=None, weights=None):
    """A copy of ``folder`` with its config.json / preprocessor.json changed by a function."""
    target = tmp_path / folder
    shutil.copytree(MODELS / folder, target)
    for name, change in (("config.json", config), ("preprocessor.json", preprocessor)):
        if change:
            values = json.loads((target / name).read_text())
            change(values)
            text = json.dumps(values).replace('"NESTED"', "[" * 100000 + "]" * 100000)
            (target / name).write_text(text)
    if weights:
        weights(target / "model_weights.hdf5")
    return tmp_path


def load_error(models_dir, folder):
    with pytest.raises(ModelLoadError) as raised:
        loaded_sequence(folder, models_dir)
    message = str(raised.value)
    assert "\n" not in message
    return message


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def shrink_word_lstm(path):
    """One layer of the file at another shape than its config says."""
    with h5py.File(path, "r+") as weights:
        name = next(n for n in weights["model"].attrs["weight_names"]
                    if "bidirectional" in n and "forward" in n and n.endswith("/kernel:0"))
        value = weights["model"][name][()]
        del weights["model"][name]
        weights["model"][name] = value[:-1]


REFUSED = {
    "elmo": (dict(config=lambda c: c.update(use_ELMo=True)),
             "ELMo is not supported"),
    "architecture": (dict(config=lambda c: c.update(architecture="BidGRU_CRF")),
                     "architecture 'BidGRU_CRF' of a DeLFT 0.x folder is not supported"),
    "truncated": (dict(weights=truncate), "model_weights.hdf5: cannot read the weights"),
    "layer_shape": (dict(weights=shrink_word_lstm),
                    "forward_lstm_1/lstm_cell_4/kernel:0 is 349x400 where the BidLSTM_CRF "
                    "model's word_lstm takes 350x400"),
    "vocabulary": (dict(preprocessor=lambda p: p["vocab_char"].pop("\u2014")),
                   "time_distributed/embeddings:0 has 70 rows, preprocessor.json's vocab_char 69 "
                   "entries"),
    "labels": (dict(preprocessor=lambda p: p["vocab_tag"].update({"O": 5})),
               "preprocessor.json: vocab_tag: the ids are not 0..6, each once"),
    "embeddings": (dict(config=lambda c: c.update(embeddings_name="glove-not-registered")),
                   "the model's word embeddings 'glove-not-registered' cannot be opened"),
    "deep_json": (dict(config=lambda c: c.update(nested="NESTED")),
                  "config.json: corrupt (nested too deep)"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_cannot_be_served_is_one_line_naming_the_folder(standin_registry, tmp_path, case):
    changes, expected = REFUSED[case]
    models_dir = damaged_copy(tmp_path, "date-BidLSTM_CRF", **changes)
    message = load_error(models_dir, "date-BidLSTM_CRF")
    assert expected in message
    assert str(models_dir / "date-BidLSTM_CRF") in message


def test_refusals_come_before_tensorflow_starts(tmp_path):
    """The CLIs read a folder's config before TensorFlow is imported: an ELMo folder is refused
    there."""
    damaged_copy(tmp_path, "date-BidLSTM_CRF", config=lambda c: c.update(use_ELMo=True))
    completed = subprocess.run(
        [sys.executable, "-c",
         "import sys\n"
         "from delft.sequenceLabelling.model_dir import read_model_config\n"
         "try:\n"
         f"    read_model_config({str(tmp_path / 'date-BidLSTM_CRF')!r})\n"
         "except Exception as error:\n"
         "    print(type(error).__name__, 'tensorflow' in sys.modules)\n"],
        cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=120)
    assert completed.stdout.split() == ["ModelLoadError", "False"], completed.stderr[-2000:]


# ---- served without Python: GROBID's ONNX bundle ----------------------------------------------

def grobid_matrix(x, f):
    """The unlabelled feature matrix GROBID sends for ``x`` (tokens) and ``f`` (their columns)."""
    return "\n\n".join("\n".join(" ".join([token] + (row or [])) for token, row in
                                 zip(tokens, rows or [None] * len(tokens)))
                       for tokens, rows in zip(x, f or [None] * len(x))) + "\n"


def standin_lmdb(registry, x):
    """GROBID's LMDB lookup of the stand-in vectors for the words of ``x``: ``{key: vector}``
    under GROBID's digit normalisation."""
    from grobid_onnx_engine import java_normalize_num

    wanted = {java_normalize_num(token) for tokens in x for token in tokens}
    path = json.loads(registry.read_text())["embeddings"][0]["path"]
    vectors = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            word, _, values = line.rstrip("\n").partition(" ")
            if word in wanted:
                vectors[word] = np.asarray(values.split(), np.float32)
    return vectors


@pytest.fixture(scope="module")
def onnx_engine():
    pytest.importorskip("tf2onnx", reason="ONNX export needs the export extra: pip install .[export]")
    pytest.importorskip("onnxruntime", reason="pip install .[export]")
    from grobid_onnx_engine import JavaOnnxModel

    return JavaOnnxModel


def test_a_shipped_folder_exports_the_bundle_grobid_java_labels_as_delft_046(
        loaded, standin_registry, onnx_engine, tmp_path):
    """``delftExport`` on a folder GROBID ships (masked, tfa CRF): GROBID's Java engine labels
    every token as ``Sequence.tag`` and DeLFT 0.4.6 do."""
    from delft.sequenceLabelling.reader import translate_iob_label_to_grobid
    from delft.export import export_model

    folder = "date-BidLSTM_CRF_FEATURES"
    bundle = export_model(str(MODELS / folder), str(tmp_path / f"{folder}.onnx"), "onnx")
    config = json.loads((tmp_path / f"{folder}.onnx" / "config.json").read_text())
    assert (config["embeddingsName"], config["wordEmbeddingSize"]) == ("glove-840B", 300)
    x, f = inputs_of(folder)
    java = onnx_engine(bundle, embeddings=standin_lmdb(standin_registry, x))
    got = java.label_grobid_input(grobid_matrix(x, f))
    expected = "".join("".join(f"{' '.join([t] + row)}\t{translate_iob_label_to_grobid(label)}\n"
                               for t, row, label in zip(tokens, rows, labels)) + "\n"
                       for tokens, rows, labels in zip(x, f, delft046_labels(folder)))
    assert got == expected
    assert labels_of(loaded[folder], x, f) == delft046_labels(folder)


def test_a_chain_crf_bundle_reads_grobid_padding_as_the_model_does(
        loaded, standin_registry, onnx_engine, tmp_path, record_property):
    """An unmasked ChainCRF folder's bundle computes what the model computes on GROBID's input
    (each sequence alone, padded to maxSequenceLength): the same emissions. GROBID's Java then
    decodes them without the padding, which DeLFT did not: how many labels that changes against
    DeLFT's own batches is measured (doc/usage.md)."""
    from delft.export import export_model

    folder = "header-BidLSTM_ChainCRF_FEATURES"
    model = loaded[folder]
    bundle = export_model(str(MODELS / folder), str(tmp_path / f"{folder}.onnx"), "onnx",
                          max_sequence_length=120)
    x, f = inputs_of(folder)
    x, f = [s for s in x if len(s) <= 120][:40], [r for s, r in zip(x, f) if len(s) <= 120][:40]
    java = onnx_engine(bundle, embeddings=standin_lmdb(standin_registry, x))
    import onnxruntime

    session = onnxruntime.InferenceSession(os.path.join(bundle, "encoder.onnx"))
    for tokens, rows in list(zip(x, f))[:5]:
        feeds = java.encoder_inputs(tokens, rows)
        onnx_emissions = session.run(None, feeds)[0][0]
        corpus = model.p.encode([tokens], [rows])
        ours = model.model(model.p.padded_batch(corpus, np.arange(1), width=120),
                           training=False).numpy()[0]
        np.testing.assert_allclose(onnx_emissions, ours, atol=1e-4, rtol=0)
    got = [java.annotate_tokens(tokens, rows) for tokens, rows in zip(x, f)]
    delft_batches = labels_of(model, x, f)
    same = sum(a == b for g, d in zip(got, delft_batches) for a, b in zip(g, d))
    record_property("chain_crf_onnx_labels_equal_to_delft_batches",
                    f"{same} of {sum(map(len, x))}")
