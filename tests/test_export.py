"""Export: GROBID's ONNX bundle read as GROBID's Java reads it, and the SavedModel read without
delft, both labelling exactly as ``Sequence.tag`` does.

The Java side (vocabularies, feature quirk, padding to maxSequenceLength, chunks, batch-1 ONNX
Runtime calls, the CRFDecoder Viterbi) is re-implemented from GROBID's source in
``tests/grobid_onnx_engine.py``.
"""
import json
import os
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

pytest.importorskip("tf2onnx", reason="ONNX export needs the export extra: pip install .[export]")
ort = pytest.importorskip("onnxruntime", reason="pip install .[export]")

from conftest import loaded_sequence, crf_sequences, run_python, unlabelled_matrix  # noqa: E402
from grobid_onnx_engine import JavaOnnxModel, java_normalize_num  # noqa: E402

from delft.sequenceLabelling import Sequence  # noqa: E402
from delft.export import export_model  # noqa: E402
from delft.export.onnx_bundle import (export_onnx_bundle,  # noqa: E402
                                                        function_to_onnx)
from delft.sequenceLabelling.layers.bilstm import BiLSTM  # noqa: E402
from delft.sequenceLabelling.reader import (load_data_and_labels_crf_string,  # noqa: E402
                                            translate_iob_label_to_grobid)
from delft.utilities.data_path import shared_data_file  # noqa: E402
from delft.utilities.errors import ConfigurationError  # noqa: E402

AFFILIATION = shared_data_file("sequenceLabelling", "grobid", "affiliation-address",
                               "affiliation-address-251225.train")
FEATURES_MODEL = "affiliation-BidLSTM_CRF_FEATURES"


def split_lines(sequences):
    """Tokens and feature columns of GROBID lines without their label (``x``, ``f``)."""
    rows = [[line.split()[:-1] for line in seq] for seq in sequences]
    return [[r[0] for r in seq] for seq in rows], [[r[1:] for r in seq] for seq in rows]


def labelled(sequences):
    """Tokens, IOB labels and features of GROBID lines, as the training reader reads them."""
    return load_data_and_labels_crf_string("\n\n".join("\n".join(seq) for seq in sequences))


def expected_java_output(sequences, tagged):
    """What ``labelGrobidInput`` must return for :func:`unlabelled_matrix` of ``sequences``."""
    out = []
    for seq, pairs in zip(sequences, tagged):
        for line, (_, label) in zip(seq, pairs):
            out.append(f"{line.rsplit(maxsplit=1)[0]}\t{translate_iob_label_to_grobid(label)}\n")
        out.append("\n")
    return "".join(out)


def assert_same_output(got, expected):
    got_lines, expected_lines = got.split("\n"), expected.split("\n")
    wrong = sum(a != b for a, b in zip(got_lines, expected_lines))
    assert len(got_lines) == len(expected_lines) and got == expected, \
        f"{wrong} of {len(expected_lines)} lines differ"


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def date_sequences(trained_date):
    return crf_sequences(trained_date.corpus_path)


@pytest.fixture(scope="module")
def date_bundle(trained_date, tmp_path_factory):
    return export_onnx_bundle(str(trained_date.model_dir),
                              str(tmp_path_factory.mktemp("bundles") / "date-BidLSTM_CRF.onnx"))


@pytest.fixture(scope="module")
def features_model(tmp_path_factory):
    """A tiny BidLSTM_CRF_FEATURES on affiliation-address, with recurrent dropout (so its word
    BiLSTM is Keras' LSTM in TF and the fused op in ONNX), and held-out sequences to tag."""
    if not AFFILIATION.is_file():
        pytest.skip(f"affiliation-address data absent ({AFFILIATION}); set DELFT_SHARED_DATA")
    sequences = [seq for seq in crf_sequences(AFFILIATION) if len(seq) <= 300]
    x, y, f = labelled(sequences[:200])
    model = Sequence(FEATURES_MODEL, architecture="BidLSTM_CRF_FEATURES", max_epoch=2,
                     batch_size=20, recurrent_dropout=0.25, seed=1, max_sequence_length=300)
    model.train(list(x), list(y), list(f))
    models_dir = tmp_path_factory.mktemp("feature_models")
    model.save(str(models_dir))
    loaded = loaded_sequence(FEATURES_MODEL, str(models_dir))
    return models_dir / FEATURES_MODEL, loaded, sequences[200:400]


# -- the converter -------------------------------------------------------------------------------
@pytest.mark.parametrize("recurrent_dropout", [0.0, 0.25])
@pytest.mark.parametrize("return_sequences", [True, False])
def test_bilstm_converts_to_onnx_lstm_within_1e5(recurrent_dropout, return_sequences):
    """tf2onnx has no BlockLSTM: our handler maps it to ONNX's LSTM. A Keras-LSTM BiLSTM (recurrent
    dropout, which trains on Keras' LSTM) infers on the same fused op, to 1e-5 of Keras' output."""
    layer = BiLSTM(6, return_sequences=return_sequences, recurrent_dropout=recurrent_dropout)
    x = np.random.default_rng(3).normal(size=(3, 7, 5)).astype(np.float32)
    lengths = np.array([7, 2, 4], np.int32)
    reference = layer(x, lengths).numpy()
    if recurrent_dropout:  # Keras' own LSTM, as it runs in training (without the dropout)
        mask = np.arange(7)[None, :] < lengths[:, None]
        reference = layer.keras_lstm(x, mask=mask, training=False).numpy()
    spec = [tf.TensorSpec([None, None, 5], tf.float32, name="x"),
            tf.TensorSpec([None], tf.int32, name="lengths")]
    fused = tf.function(lambda x, lengths: layer(x, lengths), input_signature=spec)
    concrete = fused.get_concrete_function()
    assert "BlockLSTM" in {op.type for op in concrete.graph.get_operations()}
    valid = (np.arange(7)[None, :] < lengths[:, None]) if return_sequences else slice(None)
    np.testing.assert_allclose(concrete(tf.constant(x), tf.constant(lengths)).numpy()[valid],
                               reference[valid], atol=1e-5)
    proto = function_to_onnx(concrete, "y")
    assert "LSTM" in {node.op_type for node in proto.graph.node}
    session = ort.InferenceSession(proto.SerializeToString())
    got = session.run(["y"], {"x": x, "lengths": lengths})[0]
    np.testing.assert_allclose(got[valid], reference[valid], atol=1e-5)


def test_tf2onnx_alone_leaves_our_ops_unconverted(monkeypatch):
    """Without our handlers tf2onnx 1.17 keeps BlockLSTM (and UniqueV2) as TF ops, which ONNX
    Runtime cannot load (what Keras' own ``model.export(format="onnx")`` produces): refused."""
    from delft.export import onnx_ops

    monkeypatch.setattr(onnx_ops, "CUSTOM_OP_HANDLERS", {})
    layer = BiLSTM(2, return_sequences=True)
    spec = [tf.TensorSpec([None, None, 3], tf.float32, name="x"),
            tf.TensorSpec([None], tf.int32, name="lengths")]
    function = tf.function(lambda x, lengths: layer(x, lengths), input_signature=spec)
    with pytest.raises(ConfigurationError, match=r"unconverted: \['BlockLSTM'\]"):
        function_to_onnx(function.get_concrete_function(), "y")


def test_exports_trace_blocklstm_where_a_gpu_is(loaded_date, monkeypatch):
    """On a GPU machine the model's own steps run cuDNN's LSTM; the ONNX encoder and the
    SavedModel's signature trace BlockLSTM (a GPU is faked: the graphs are built, not run)."""
    from delft.export.onnx_bundle import encoder_function, word_embedding_width
    from delft.export.saved_model import LabellingModule

    real = tf.config.list_logical_devices
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda kind=None: [
        tf.config.LogicalDevice("/device:GPU:0", "GPU")] if kind == "GPU" else real(kind))
    graphs = [encoder_function(loaded_date, word_embedding_width(loaded_date), None).graph,
              LabellingModule(loaded_date.model, loaded_date.p.batch_signature(False))
              .serve.get_concrete_function().graph]
    for graph in graphs:
        ops = {op.type for op in graph.get_operations()}
        assert "BlockLSTM" in ops and "CudnnRNNV3" not in ops


# -- the bundle ----------------------------------------------------------------------------------
def test_bundle_is_what_grobid_reads(date_bundle, trained_date):
    assert sorted(os.listdir(date_bundle)) == ["config.json", "crf_params.json", "encoder.onnx",
                                               "vocab.json"]
    config = json.loads(open(os.path.join(date_bundle, "config.json")).read())
    assert list(config) == ["modelName", "architecture", "wordEmbeddingSize", "charEmbeddingSize",
                            "numCharLstmUnits", "numWordLstmUnits", "maxSequenceLength",
                            "embeddingsName"]
    assert config["maxSequenceLength"] == trained_date.model.model_config.max_sequence_length
    assert (config["wordEmbeddingSize"], config["embeddingsName"]) == (1, "none")
    vocab = json.loads(open(os.path.join(date_bundle, "vocab.json")).read())
    assert vocab["charVocab"]["<PAD>"] == 0 and vocab["charVocab"]["<UNK>"] == 1
    assert "featuresIndices" not in vocab
    crf = json.loads(open(os.path.join(date_bundle, "crf_params.json")).read())
    labels = len(vocab["tagIndex"])
    assert np.shape(crf["transitions"]) == (labels, labels)
    assert len(crf["startTransitions"]) == len(crf["endTransitions"]) == labels
    session = ort.InferenceSession(os.path.join(date_bundle, "encoder.onnx"))
    inputs = {i.name: (i.type, i.shape) for i in session.get_inputs()}
    assert inputs == {"word_input": ("tensor(float)", ["batch_size", "seq_length", 1]),
                      "char_input": ("tensor(int64)", ["batch_size", "seq_length", 30])}
    (output,) = session.get_outputs()
    assert (output.name, output.type, output.shape) == (
        "emissions", "tensor(float)", ["batch_size", "seq_length", labels])


def test_emissions_do_not_depend_on_padding_nor_word_input(date_bundle, loaded_date):
    """GROBID pads every call to maxSequenceLength (and batches chunks in its newer fork): the
    emissions of real tokens are the model's potentials whatever the padding; a char-only
    model's ``word_input`` is ignored."""
    java = JavaOnnxModel(date_bundle)
    tokens = [["12", "March", "2005"], ["Received", "June", "3", ",", "1999", "."]]
    chars = np.stack([java.tokens_to_char_indices(t, 50) for t in tokens])
    noise = np.random.default_rng(0).normal(size=(2, 50, 1)).astype(np.float32)
    padded = java.session.run(["emissions"], {"word_input": noise, "char_input": chars})[0]
    batch = loaded_date.p.padded_batch(loaded_date.p.encode(tokens), np.arange(2))
    potentials = loaded_date.model.word_potentials(batch).numpy()
    for row, seq in enumerate(tokens):
        np.testing.assert_allclose(padded[row, :len(seq)], potentials[row, :len(seq)], atol=1e-5)
        single = java.session.run(["emissions"], {"word_input": noise[row:row + 1, :len(seq)],
                                                  "char_input": chars[row:row + 1, :len(seq)]})[0]
        np.testing.assert_allclose(single[0], padded[row, :len(seq)], atol=1e-6)
    assert not padded[:, max(map(len, tokens)):].any()  # not computed past the longest row


def test_java_engine_labels_date_as_sequence_tag(date_bundle, date_sequences, loaded_date):
    java = JavaOnnxModel(date_bundle)
    x, f = split_lines(date_sequences)
    got = java.label_grobid_input(unlabelled_matrix(date_sequences))
    assert java.calls == len(date_sequences)  # one batch-1 call per sequence, as GROBID runs it
    assert_same_output(got, expected_java_output(date_sequences, loaded_date.tag(x)))


def test_java_engine_labels_affiliations_with_features_as_sequence_tag(features_model, tmp_path):
    model_dir, loaded, sequences = features_model
    assert loaded.p.features_indices[0] > 0  # GROBID's positional feature lookup is exercised
    bundle = export_onnx_bundle(str(model_dir), str(tmp_path / "affiliation.onnx"))
    java = JavaOnnxModel(bundle)
    vocab = json.loads(open(os.path.join(bundle, "vocab.json")).read())
    assert vocab["featuresIndices"] == list(range(max(loaded.p.features_indices) + 1))
    x, f = split_lines(sequences)
    got = java.label_grobid_input(unlabelled_matrix(sequences))
    assert_same_output(got, expected_java_output(sequences, loaded.tag(x, features=f)))


def test_chain_crf_names_export_alike(trained_date, tmp_path):
    """BidLSTM_ChainCRF is the same model under DeLFT's other name: the same bundle."""
    import shutil

    model_dir = tmp_path / "date-BidLSTM_ChainCRF"
    shutil.copytree(trained_date.model_dir, model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps(dict(config,
                                                           architecture="BidLSTM_ChainCRF")))
    bundle = export_onnx_bundle(str(model_dir), str(tmp_path / "chain.onnx"))
    assert json.loads(open(os.path.join(bundle, "config.json")).read())["architecture"] == \
        "BidLSTM_ChainCRF"


def tiny_model(sequences, architecture, models_dir, **options):
    """``date-<architecture>`` trained for one epoch on ``sequences``, saved in ``models_dir``."""
    x, y, f = labelled(sequences)
    model = Sequence(f"date-{architecture}", architecture=architecture, max_epoch=1,
                     word_lstm_units=8, recurrent_dropout=0.0, seed=1, **options)
    model.train(list(x), list(y), list(f) if "FEATURES" in architecture else None)
    model.save(str(models_dir))
    return model, models_dir / f"date-{architecture}"


def test_cnn_crf_bundle_labels_as_sequence_tag(date_sequences, tmp_path):
    """BidLSTM_CNN_CRF reads words and characters only: its char CNN converts, and GROBID's
    engine labels as Sequence.tag does."""
    model, model_dir = tiny_model(date_sequences[:100], "BidLSTM_CNN_CRF", tmp_path)
    java = JavaOnnxModel(export_onnx_bundle(str(model_dir), str(tmp_path / "cnn.onnx")))
    sequences = date_sequences[100:160]
    x, _ = split_lines(sequences)
    assert_same_output(java.label_grobid_input(unlabelled_matrix(sequences)),
                       expected_java_output(sequences, model.tag(x)))


def test_lstm_features_encoder_bundle_labels_as_sequence_tag(date_sequences, tmp_path):
    """DeLFT's BiLSTM over the feature columns (``features_encoder="lstm"``) converts too."""
    model, model_dir = tiny_model(date_sequences[:100], "BidLSTM_CRF_FEATURES", tmp_path,
                                  features_encoder="lstm")
    java = JavaOnnxModel(export_onnx_bundle(str(model_dir), str(tmp_path / "features.onnx")))
    sequences = date_sequences[100:160]
    x, _, f = labelled(sequences)
    assert_same_output(java.label_grobid_input(unlabelled_matrix(sequences)),
                       expected_java_output(sequences, model.tag(list(x), None,
                                                                 features=list(f))))


@pytest.mark.parametrize("architecture,reason", [
    ("BidLSTM_CNN", "casing class"), ("BidLSTM_CRF_CASING", "casing class"),
    ("BidGRU_CRF", "GRU")])
def test_onnx_refuses_casing_and_gru_models_in_one_line(date_sequences, tmp_path, architecture,
                                                        reason):
    """Their SavedModel serves them (the casing ids come with the batch), as Sequence.tag."""
    model, model_dir = tiny_model(date_sequences[:60], architecture, tmp_path / "models")
    with pytest.raises(ConfigurationError, match=rf"^{architecture}: no ONNX bundle: .*{reason}"):
        export_model(str(model_dir), str(tmp_path / "refused.onnx"), "onnx")
    assert not (tmp_path / "refused.onnx").exists()
    export = tmp_path / "savedmodel"
    export_model(str(model_dir), str(export), "savedmodel")
    vocab = json.loads((export / "vocab.json").read_text())
    assert ("casing" in vocab["inputs"]) == (reason == "casing class")
    signature = tf.saved_model.load(str(export / "1")).signatures["serving_default"]
    x, _ = split_lines(date_sequences[60:90])
    batch = model.p.padded_batch(model.p.encode(x), np.arange(len(x)))
    tags = signature(**{k: tf.constant(v) for k, v in batch.items()})["tags"].numpy()
    assert [[vocab["tagIndex"][str(k)] for k in row[:len(s)]] for row, s in zip(tags, x)] == \
        [[label for _, label in pairs] for pairs in model.tag(x)]


def test_model_without_crf_decodes_as_its_argmax(date_sequences, tmp_path):
    """BidLSTM (softmax) gets zero transitions: GROBID's Viterbi is then the per-word argmax."""
    x, y, _ = labelled(date_sequences[:100])
    model = Sequence("date-BidLSTM", architecture="BidLSTM", max_epoch=1, recurrent_dropout=0.0)
    model.train(list(x), list(y))
    model.save(str(tmp_path))
    bundle = export_onnx_bundle(str(tmp_path / "date-BidLSTM"), str(tmp_path / "softmax.onnx"))
    crf = json.loads(open(os.path.join(bundle, "crf_params.json")).read())
    assert not np.any(crf["transitions"]) and not np.any(crf["startTransitions"])
    java = JavaOnnxModel(bundle)
    assert [java.annotate_tokens(seq, None) for seq in x] == \
        [[label for _, label in pairs] for pairs in model.tag(list(x))]


def test_longer_sequences_are_labelled_in_independent_chunks(trained_date, date_sequences,
                                                             loaded_date, tmp_path,
                                                             record_property):
    """GROBID cuts a sequence longer than maxSequenceLength into consecutive chunks, each decoded
    on its own (the CRF restarts, start/end scores at every border): the labels are those of
    ``Sequence.tag`` on each chunk, not on the whole sequence."""
    bundle = export_onnx_bundle(str(trained_date.model_dir), str(tmp_path / "short.onnx"),
                                max_sequence_length=4)
    java = JavaOnnxModel(bundle)
    long_ones = [seq for seq in date_sequences if len(seq) > 4]
    x, _ = split_lines(long_ones)
    chunks = [seq[i:i + 4] for seq in x for i in range(0, len(seq), 4)]
    tagged = iter(loaded_date.tag(chunks))
    chunked = [[pair for _ in range(0, len(seq), 4) for pair in next(tagged)] for seq in x]
    got = java.label_grobid_input(unlabelled_matrix(long_ones))
    assert java.calls == len(chunks)
    assert_same_output(got, expected_java_output(long_ones, chunked))
    whole = loaded_date.tag(x)
    changed = sum(a[1] != b[1] for c, w in zip(chunked, whole) for a, b in zip(c, w))
    record_property("labels_changed_by_chunking", f"{changed} of {sum(map(len, x))}")


def test_word_embeddings_model_reads_word_input(date_sequences, tmp_path, monkeypatch):
    """A model with static embeddings reads GROBID's looked-up vectors from ``word_input``: both
    sides look the words up with their digits turned to 0 (DeLFT's and GROBID's lookup)."""
    x, y, _ = labelled(date_sequences[:80])
    x, y = list(map(list, x)), list(y)
    rng = np.random.default_rng(5)
    lmdb = {}
    for word in sorted({t for seq in x for t in seq}):
        lmdb.setdefault(java_normalize_num(word), " ".join(f"{v:.3f}" for v in rng.normal(size=4)))
    vec = tmp_path / "tiny.vec"
    vec.write_text("".join(f"{w} {v}\n" for w, v in sorted(lmdb.items())), encoding="utf-8")
    monkeypatch.setenv("DELFT_EMBEDDING_LMDB_PATH", str(tmp_path / "db"))
    model = Sequence("date-words", embeddings_name=str(vec), max_epoch=1, recurrent_dropout=0.0)
    model.train(x, y)
    model.save(str(tmp_path / "models"))
    bundle = export_onnx_bundle(str(tmp_path / "models" / "date-words"), str(tmp_path / "w.onnx"),
                                embeddings_name="tiny")
    config = json.loads(open(os.path.join(bundle, "config.json")).read())
    assert (config["wordEmbeddingSize"], config["embeddingsName"]) == (4, "tiny")
    java = JavaOnnxModel(bundle, embeddings={k: np.asarray(v.split(), np.float32)
                                             for k, v in lmdb.items()})
    expected = [[label for _, label in pairs] for pairs in model.tag(x)]
    assert [java.annotate_tokens(seq, None) for seq in x] == expected
    export = tmp_path / "words-savedmodel"
    export_model(str(tmp_path / "models" / "date-words"), str(export), "savedmodel")
    vocab = json.loads((export / "vocab.json").read_text())
    signature = tf.saved_model.load(str(export / "1")).signatures["serving_default"]
    batch = model.p.padded_batch(model.p.encode(x[:8]), np.arange(8))
    assert "word_vectors" in vocab["inputs"]
    tags = signature(**{k: tf.constant(v) for k, v in batch.items()})["tags"].numpy()
    assert [[vocab["tagIndex"][str(k)] for k in row[:len(s)]] for row, s in zip(tags, x)] == \
        expected[:8]


# -- the SavedModel ------------------------------------------------------------------------------
CLIENT = textwrap.dedent('''
    """A SavedModel client that only knows TensorFlow and vocab.json: argv is (export folder,
    tokens and features JSON, result JSON) triples."""
    import json, sys
    import numpy as np
    import tensorflow as tf


    def label(export, data, result):
        vocab = json.load(open(f"{export}/vocab.json"))
        signature = tf.saved_model.load(f"{export}/1").signatures["serving_default"]
        texts = json.load(open(data))
        chars, unk, width = vocab["charVocab"], vocab["charVocab"]["<UNK>"], vocab["maxCharLength"]
        columns = vocab.get("featuresIndices") or []
        labels = []
        for start in range(0, len(texts["x"]), 64):
            x, f = texts["x"][start:start + 64], texts["f"][start:start + 64]
            steps = max(map(len, x))
            batch = {"lengths": np.array([len(s) for s in x], np.int32),
                     "chars": np.zeros((len(x), steps, width), np.int32)}
            for i, seq in enumerate(x):
                for t, token in enumerate(seq):
                    ids = [chars.get(c, unk) for c in token[:width]]
                    batch["chars"][i, t, :len(ids)] = ids
            if columns:
                batch["features"] = np.zeros((len(x), steps, len(columns)), np.int32)
                for i, seq in enumerate(f):
                    for t, values in enumerate(seq):
                        batch["features"][i, t] = [vocab["featuresMapToIndex"][str(c)].get(
                            values[c], 0) for c in columns]
            tags = signature(**{k: tf.constant(v) for k, v in batch.items()})["tags"].numpy()
            labels += [[vocab["tagIndex"][str(k)] for k in row[:len(s)]] for row, s in zip(tags, x)]
        json.dump({"labels": labels, "delft_imported": "delft" in sys.modules}, open(result, "w"))


    for export, data, result in zip(*[iter(sys.argv[1:])] * 3):
        label(export, data, result)
''')


def saved_model_labels(jobs, tmp_path):
    """Labels of each ``(export folder, x, f)`` job, from one fresh process without delft."""
    (tmp_path / "client.py").write_text(CLIENT)
    args = []
    for i, (export, x, f) in enumerate(jobs):
        (tmp_path / f"data{i}.json").write_text(json.dumps({"x": x, "f": f}))
        args += [export, tmp_path / f"data{i}.json", tmp_path / f"result{i}.json"]
    done = run_python([tmp_path / "client.py", *args], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads((tmp_path / f"result{i}.json").read_text()) for i in range(len(jobs))]
    assert not any(result["delft_imported"] for result in results)
    return [result["labels"] for result in results]


@pytest.fixture(scope="module")
def saved_model_runs(trained_date, date_sequences, loaded_date, request, tmp_path_factory):
    """``{name: (labels from the SavedModel, labels from Sequence.tag)}`` for the date model, a
    BidGRU_CRF (its GRU's written-out gradient is saved with it) and, when the data is there, the
    affiliation model with features."""
    tmp_path = tmp_path_factory.mktemp("saved_models")
    x, f = split_lines(date_sequences)
    written = export_model(str(trained_date.model_dir), str(tmp_path / "date"), "savedmodel")
    assert written == str(tmp_path / "date" / "1")
    jobs = {"date": (str(tmp_path / "date"), x, f, loaded_date.tag(x))}
    gru, gru_dir = tiny_model(date_sequences, "BidGRU_CRF", tmp_path / "models")
    export_model(str(gru_dir), str(tmp_path / "gru"), "savedmodel")
    jobs["gru"] = (str(tmp_path / "gru"), x, f, gru.tag(x))
    if AFFILIATION.is_file():
        model_dir, loaded, sequences = request.getfixturevalue("features_model")
        export_model(str(model_dir), str(tmp_path / "affiliation"), "savedmodel")
        x, f = split_lines(sequences)
        jobs["affiliation"] = (str(tmp_path / "affiliation"), x, f, loaded.tag(x, features=f))
    got = saved_model_labels([job[:3] for job in jobs.values()], tmp_path)
    return {name: (labels, [[label for _, label in pairs] for pairs in job[3]])
            for (name, job), labels in zip(jobs.items(), got)}


def test_saved_model_labels_date_as_sequence_tag_without_delft(saved_model_runs):
    got, expected = saved_model_runs["date"]
    assert got == expected


def test_saved_model_labels_a_gru_model_as_sequence_tag_without_delft(saved_model_runs):
    got, expected = saved_model_runs["gru"]
    assert got == expected


def test_saved_model_labels_affiliations_with_features_without_delft(saved_model_runs):
    if "affiliation" not in saved_model_runs:
        pytest.skip(f"affiliation-address data absent ({AFFILIATION}); set DELFT_SHARED_DATA")
    got, expected = saved_model_runs["affiliation"]
    assert got == expected


@pytest.mark.slow
def test_transformer_saved_model_with_tokenizer_and_no_onnx(date_sequences, tmp_path):
    from tiny_transformers import write_tiny_checkpoint

    checkpoint = write_tiny_checkpoint("bert", str(tmp_path / "bert"))
    x, y, _ = labelled(date_sequences[:20])
    x, y = list(x), list(y)
    model = Sequence("tiny-BERT_CRF", architecture="BERT_CRF", transformer_name=checkpoint,
                     max_epoch=1, learning_rate=1e-3)
    model.train(x, y)
    model.save(str(tmp_path / "models"))
    model_dir = str(tmp_path / "models" / "tiny-BERT_CRF")
    with pytest.raises(ConfigurationError, match="transformer family"):
        export_model(model_dir, str(tmp_path / "t.onnx"), "onnx")
    assert not (tmp_path / "t.onnx").exists()
    export = tmp_path / "bert-savedmodel"
    export_model(model_dir, str(export), "savedmodel")
    assert (export / "transformer" / "tokenizer.json").is_file()
    vocab = json.loads((export / "vocab.json").read_text())
    assert vocab["transformer"]["tokenizer"] == "transformer"
    signature = tf.saved_model.load(str(export / "1")).signatures["serving_default"]
    corpus = model.p.encode(x[:6])
    batch = model.p.padded_batch(corpus, np.arange(6))
    tags = signature(**{k: tf.constant(v) for k, v in batch.items()})["tags"].numpy()
    got = [[vocab["tagIndex"][str(k)] for k in row[:len(s)]] for row, s in zip(tags, x[:6])]
    assert got == [[label for _, label in pairs] for pairs in model.tag(x[:6])]


# -- the command ---------------------------------------------------------------------------------
def test_command_writes_the_bundle_with_its_max_sequence_length(trained_date, tmp_path):
    out = tmp_path / "date-BidLSTM_CRF.onnx"
    done = run_python(["-m", "delft.applications.export", trained_date.model_dir, "--format",
                       "onnx", "--output", out, "--max-sequence-length", "7"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((out / "config.json").read_text())["maxSequenceLength"] == 7
    # no staging folder left; the hidden lock serialising exports into it stays
    assert sorted(os.listdir(tmp_path)) == [".date-BidLSTM_CRF.onnx.lock", "date-BidLSTM_CRF.onnx"]


def test_command_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    from delft.applications.export import main

    missing = tmp_path / "missing"
    assert main([str(missing), "--format", "onnx", "--output", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: {missing}: no such model directory\n"
    assert main([str(missing), "--format", "savedmodel", "--output", str(tmp_path / "out"),
                 "--max-sequence-length", "9"]) == 2
    assert "ONNX bundle options" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_a_failed_export_leaves_no_output(trained_date, tmp_path, monkeypatch):
    from delft.export import onnx_bundle

    def fail(*_):
        raise OSError("disk full")

    out = tmp_path / "bundle"
    monkeypatch.setattr(onnx_bundle, "write_json", fail)
    with pytest.raises(OSError, match="disk full"):
        export_onnx_bundle(str(trained_date.model_dir), str(out))
    assert os.listdir(tmp_path) == [".bundle.lock"]  # the save lock stays (doc/usage.md)
