"""DeLFT 1.x folders (PyTorch, ``model.safetensors``) load as they are and tag as DeLFT 1.2.0 does.

The folders and DeLFT 1.2.0's labels and emissions are committed in ``tests/data/delft1/`` with
the script that made them (its README documents the format); their word vectors are
``tiny-vectors.vec``, registered as DeLFT's registry named them (``tiny-date-16d``).
"""
import json
import shutil

import numpy as np
import pytest

from conftest import REPO_ROOT, labels_of, loaded_sequence, registry_of, run_python
from delft.utilities.errors import ModelLoadError

FOLDERS_DIR = REPO_ROOT / "tests" / "data" / "delft1"
LOADED = ("date-BidLSTM_CRF", "date-BidLSTM_CRF-charonly", "date-BidLSTM_CRF_FEATURES",
          "date-BidGRU_CRF", "date-BidLSTM_ChainCRF", "date-BidLSTM_ChainCRF_FEATURES",
          "date-BidLSTM_CNN_CRF", "date-BidLSTM_CRF_CASING", "date-BERT", "date-BERT_CRF")
REFUSED = {
    "date-BidLSTM": "its classifier reads the BiLSTM states",
    "date-BidLSTM_CNN": "its classifier reads the BiLSTM states",
    "date-BERT_ChainCRF": "its CRF decodes the padding of DeLFT's batches of subtokens",
    "date-BERT_FEATURES": "its BiLSTM over the subtokens and features is not a layer of ours",
    "date-BERT_CRF_FEATURES": "its BiLSTM over the subtokens and features is not a layer of ours",
    "date-BERT_ChainCRF_FEATURES": "its BiLSTM over the subtokens and features",
}


@pytest.fixture(scope="module")
def tiny_registry(tmp_path_factory):
    """The registry DeLFT 1.2.0 trained with: ``tiny-date-16d`` for ``tiny-vectors.vec``."""
    with registry_of(tmp_path_factory.mktemp("tiny_vectors"), "tiny-date-16d",
                     FOLDERS_DIR / "tiny-vectors.vec") as registry:
        yield registry


def reference(folder):
    return json.loads((FOLDERS_DIR / "reference" / f"{folder}.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def loaded(tiny_registry):
    return {folder: loaded_sequence(folder, FOLDERS_DIR) for folder in LOADED}


@pytest.mark.parametrize("folder", LOADED)
def test_labels_equal_delft_120(loaded, folder):
    """Every token of every sequence DeLFT 1.2.0 labels whole (those within the folder's
    max_sequence_length: it cuts longer ones, which are tagged whole here), ``<PAD>`` labels and
    the batch dependence of the ChainCRF folders included."""
    ref = reference(folder)
    got = labels_of(loaded[folder], ref["x"], ref["f"])
    assert [len(s) for s in got] == [len(s) for s in ref["x"]]  # every token labelled
    whole = [i for i, (x, y) in enumerate(zip(ref["x"], ref["labels"])) if len(x) == len(y)]
    assert len(whole) >= 150
    wrong = [i for i in whole if got[i] != ref["labels"][i]]
    assert wrong == [], f"sequences {wrong[:10]} differ"
    assert len({label for i in whole for label in got[i]}) >= 4


def test_chain_crf_folders_depend_on_their_batch_as_in_delft_120(loaded):
    """DeLFT 1.x's ChainCRF folders read their padding too: alone, many sequences change."""
    folder = "date-BidLSTM_ChainCRF"
    ref = reference(folder)
    alone = labels_of(loaded[folder], ref["x"][:150], ref["f"], batch_size=1)
    changed = sum(a != b for a, b in zip(alone, ref["labels"][:150]))
    assert changed >= 10


@pytest.mark.parametrize("folder", ["date-BidLSTM_CRF", "date-BidGRU_CRF",
                                    "date-BidLSTM_ChainCRF_FEATURES", "date-BidLSTM_CNN_CRF",
                                    "date-BERT_CRF"])
def test_emissions_within_1e4_of_delft_120(loaded, folder):
    """The potentials DeLFT 1.2.0 decodes (per word, or per subtoken for BERT_CRF), for the
    first 5 sequences of the first batch padded as DeLFT padded it; every position a model
    reads (the padding too for ChainCRF)."""
    ref = reference(folder)
    model = loaded[folder]
    rows = ref["batch_size"]
    corpus = model.p.encode(ref["x"][:rows], ref["f"][:rows] if ref["f"] else None)
    batch = model.p.padded_batch(corpus, np.arange(rows))
    ours = model.model(batch, training=False).numpy()
    theirs = np.asarray(ref["emissions"], np.float32)
    assert ours.shape[1] == ref["emissions_batch_length"] == theirs.shape[1]
    for row in range(len(theirs)):
        if "ChainCRF" in folder:
            read = theirs.shape[1]
        elif folder.startswith("date-BERT"):
            read = int(batch["padding_mask"][row].sum())
        else:
            read = len(ref["x"][row])
        np.testing.assert_allclose(ours[row, :read], theirs[row, :read], atol=1e-4, rtol=0)


def test_two_replicas_give_the_same_labels(loaded, tiny_registry, tmp_path):
    script = tmp_path / "two.py"
    script.write_text(
        "import json, sys\n"
        "from delft.sequenceLabelling import Sequence\n"
        "folders, out, *names = sys.argv[1:]\n"
        "result = {}\n"
        "for name in names:\n"
        "    ref = json.load(open(f'{folders}/reference/{name}.json'))\n"
        "    model = Sequence(name)\n"
        "    model.load(dir_path=folders, multi_gpu=True)\n"
        "    result[name] = [[l for _, l in s] for s in model.tag(ref['x'], None, "
        "features=ref['f'], multi_gpu=True)]\n"
        "json.dump(result, open(out, 'w'))\n")
    names = ["date-BidLSTM_ChainCRF_FEATURES", "date-BidGRU_CRF", "date-BERT_CRF"]
    out = tmp_path / "two.json"
    completed = run_python([script, FOLDERS_DIR, out, *names], timeout=600,
                           DELFT_CPU_REPLICAS=2, DELFT_RESOURCE_REGISTRY=tiny_registry)
    assert completed.returncode == 0, completed.stderr[-3000:]
    two = json.loads(out.read_text())
    for name in names:
        ref = reference(name)
        assert two[name] == labels_of(loaded[name], ref["x"], ref["f"]), name


@pytest.mark.parametrize("folder", ["date-BidGRU_CRF", "date-BidLSTM_ChainCRF", "date-BERT_CRF"])
def test_incremental_training_then_saved_reloads_identically(tiny_registry, tmp_path, folder):
    """Training goes on from a DeLFT 1.x folder (BERT_CRF's loss over every subtoken, as DeLFT
    1.x trains it), ``save`` writes our own format, and that folder tags as the model in memory
    did."""
    model = loaded_sequence(folder, FOLDERS_DIR)
    model.training_config.max_epoch = 1
    ref = reference(folder)
    whole = [i for i, (x, y) in enumerate(zip(ref["x"], ref["labels"])) if len(x) == len(y)]
    x, y = [ref["x"][i] for i in whole], [ref["labels"][i] for i in whole]
    f = [ref["f"][i] for i in whole] if ref["f"] else None
    before = labels_of(model, x[100:], f[100:] if f else None)
    model.train(x[:100], y[:100], f[:100] if f else None, incremental=True)
    in_memory = labels_of(model, x[100:], f[100:] if f else None)
    weights_moved = in_memory != before or model.history
    assert weights_moved
    model.save(str(tmp_path))
    assert (tmp_path / folder / "model.weights.h5").is_file()
    reloaded = loaded_sequence(folder, tmp_path)
    assert reloaded.model_config.crf_over_subtokens == (folder == "date-BERT_CRF")
    assert labels_of(reloaded, x[100:], f[100:] if f else None) == in_memory


@pytest.mark.parametrize("folder", sorted(REFUSED))
def test_architectures_we_cannot_serve_are_one_line(tiny_registry, folder):
    with pytest.raises(ModelLoadError) as raised:
        loaded_sequence(folder, FOLDERS_DIR)
    message = str(raised.value)
    assert "\n" not in message and REFUSED[folder] in message
    assert str(FOLDERS_DIR / folder) in message


def damaged(tmp_path, folder, change):
    target = tmp_path / folder
    shutil.copytree(FOLDERS_DIR / folder, target)
    change(target)
    return tmp_path


def pickled_only(target):
    (target / "model.safetensors").rename(target / "model_weights.pt")


def truncated(target):
    data = (target / "model.safetensors").read_bytes()
    (target / "model.safetensors").write_bytes(data[:len(data) // 2])


def extra_layer(target):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(target / "model.safetensors"))
    tensors["highway.weight"] = np.zeros((2, 2), np.float32)
    save_file(tensors, str(target / "model.safetensors"))


def shrunk_vocabulary(target):
    values = json.loads((target / "preprocessor.json").read_text())
    last = max(values["vocab_char"], key=values["vocab_char"].get)
    del values["vocab_char"][last]
    (target / "preprocessor.json").write_text(json.dumps(values))


DAMAGED = {
    "pickled": (pickled_only, "weights are pickled (model_weights.pt), which is never unpickled"),
    "truncated": (truncated, "model.safetensors: cannot read the weights"),
    "extra_layer": (extra_layer, "model.safetensors: highway.weight: a layer we do not have"),
    "vocabulary": (shrunk_vocabulary, "char_encoder.char_embeddings.weight has 67 rows, "
                                      "preprocessor.json's vocab_char 66 entries"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_folder_is_one_line(tiny_registry, tmp_path, case):
    change, expected = DAMAGED[case]
    models_dir = damaged(tmp_path, "date-BidLSTM_CRF", change)
    with pytest.raises(ModelLoadError) as raised:
        loaded_sequence("date-BidLSTM_CRF", models_dir)
    assert "\n" not in str(raised.value) and expected in str(raised.value)


def test_a_delft1_folder_exports_the_bundle_grobid_java_labels_as_delft(loaded, tmp_path):
    """``delftExport`` on a DeLFT 1.x FEATURES folder: GROBID's Java engine labels as
    ``Sequence.tag`` and DeLFT 1.2.0 do."""
    pytest.importorskip("tf2onnx", reason="pip install .[export]")
    pytest.importorskip("onnxruntime", reason="pip install .[export]")
    from grobid_onnx_engine import JavaOnnxModel

    from delft.export import export_model

    folder = "date-BidLSTM_CRF_FEATURES"
    bundle = export_model(str(FOLDERS_DIR / folder), str(tmp_path / f"{folder}.onnx"), "onnx")
    lmdb = {}  # GROBID's LMDB holds the file's words as written; it looks up their digits as 0
    for line in (FOLDERS_DIR / "tiny-vectors.vec").read_text(encoding="utf-8").splitlines()[1:]:
        word, *values = line.split(" ")
        lmdb[word] = np.asarray(values, np.float32)
    java = JavaOnnxModel(bundle, embeddings=lmdb)
    ref = reference(folder)
    pairs = [(x, f, y) for x, f, y in zip(ref["x"], ref["f"], ref["labels"]) if len(x) == len(y)]
    got = [java.annotate_tokens(x, f) for x, f, _ in pairs]
    assert got == [y for _, _, y in pairs]
    assert got == [labels for labels in labels_of(loaded[folder], [x for x, _, _ in pairs],
                                                  [f for _, f, _ in pairs])]


def test_a_delft1_bert_crf_folder_exports_a_savedmodel_labelling_as_delft(loaded, tmp_path):
    """The SavedModel of a DeLFT 1.x BERT_CRF folder decodes every subtoken, as DeLFT does."""
    import tensorflow as tf

    from delft.export import export_model

    folder = "date-BERT_CRF"
    model = loaded[folder]
    export = tmp_path / "bert-crf-savedmodel"
    export_model(str(FOLDERS_DIR / folder), str(export), "savedmodel")
    signature = tf.saved_model.load(str(export / "1")).signatures["serving_default"]
    vocab = json.loads((export / "vocab.json").read_text())
    ref = reference(folder)
    x = ref["x"][:20]
    batch = model.p.padded_batch(model.p.encode(x), np.arange(len(x)))
    tags = signature(**{k: tf.constant(v) for k, v in batch.items()})["tags"].numpy()
    got = [[vocab["tagIndex"][str(k)] for k in row[:len(s)]] for row, s in zip(tags, x)]
    assert got == [y for y in ref["labels"][:20]]
