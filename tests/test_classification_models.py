"""The text-classification architectures: every one builds for its inputs, gives probabilities,
a finite weighted loss, learns a separable toy problem; layers' configs round trip; DeLFT 0.4.6's
gru weights (Keras 2 HDF5, GROBID's copyright_gru) go onto our gru model; bert on tiny BERT,
DistilBERT and RoBERTa checkpoints."""
import os
import shutil

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import GROBID_MODELS
from delft.sequenceLabelling.layers.bigru import BiGRU
from delft.textClassification.config import ModelConfig
from delft.textClassification.foreign import (assign_delft0_weights,
                                              read_delft0_classifier_weights, read_delft0_shapes)
from delft.textClassification.models import ARCHITECTURES, architecture, build_classifier
from delft.textClassification.models.base import MaxAndMeanPooling, PaddedEmbedding, TextClassifier
from delft.textClassification.models.bert import FirstTokenEncoder
from delft.textClassification.models.cnn import CNN_RECIPES, DPCNN
from delft.textClassification.models.rnn import RNN_RECIPES, ForwardGRU, ForwardLSTM, LayerStack
from delft.utilities.errors import ConfigurationError, ModelLoadError
from tiny_transformers import write_tiny_checkpoint

WORD_ARCHITECTURES = [name for name in ARCHITECTURES if name != "bert"]
CLASSES = ["a", "b", "c"]
VOCAB, WIDTH = 12, 6  # learned embeddings: rows and width


def small_config(name, **fields):
    """A small ModelConfig of ``name``: 8 positions (dpcnn needs 95), 4 units."""
    values = dict(architecture=name, list_classes=CLASSES, maxlen=95 if name == "dpcnn" else 8,
                  recurrent_units=4, dense_size=3, vocab_size=VOCAB, word_embedding_size=WIDTH)
    return ModelConfig(**dict(values, **fields))


def word_batch(config, inputs, rows=4, seed=0):
    """A batch of ``rows`` post-padded texts: word ids or random vectors, one-hot labels."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(2, VOCAB, (rows, config.maxlen)).astype(np.int32)
    for row in range(rows):
        ids[row, rng.integers(1, config.maxlen):] = 0
    batch = {"labels": np.eye(len(CLASSES), dtype=np.float32)[np.arange(rows) % len(CLASSES)]}
    if inputs == "word_ids":
        batch["word_ids"] = ids
    else:
        vectors = rng.normal(size=(rows, config.maxlen, WIDTH)).astype(np.float32)
        batch["word_vectors"] = vectors * (ids > 0)[..., None]
    return batch


def same_outputs(first, second, inputs, atol=1e-6):
    np.testing.assert_allclose(np.asarray(first(inputs)), np.asarray(second(inputs)), atol=atol)


# -- the table --------------------------------------------------------------------------------
def test_the_eleven_architectures_and_their_families():
    assert sorted(ARCHITECTURES) == sorted(["gru", "gru_simple", "gru_lstm", "lstm",
                                            "bidLstm_simple", "cnn", "cnn2", "cnn3", "lstm_cnn",
                                            "dpcnn", "bert"])
    assert set(RNN_RECIPES) == {n for n, a in ARCHITECTURES.items() if a.family == "rnn"}
    assert set(CNN_RECIPES) | {"dpcnn"} == {n for n, a in ARCHITECTURES.items()
                                             if a.family == "cnn"}
    assert [n for n, a in ARCHITECTURES.items() if a.uses_transformer] == ["bert"]
    assert architecture("gru").name == "gru"


def test_unknown_architecture_is_one_line_naming_the_known_ones():
    with pytest.raises(ConfigurationError) as error:
        architecture("BidLSTM_CRF")
    assert "\n" not in str(error.value) and "gru_simple" in str(error.value)
    with pytest.raises(ConfigurationError, match="unknown architecture 'nope'"):
        build_classifier(ModelConfig(architecture="nope", list_classes=CLASSES), "word_vectors")


@pytest.mark.parametrize("inputs, fields, message", [
    ("transformer", {}, "reads word_ids or word_vectors"),
    ("chars", {}, "unknown classifier inputs"),
    ("word_ids", {"vocab_size": None}, "needs vocab_size"),
    ("word_vectors", {"list_classes": []}, "no classes"),
    ("word_vectors", {"architecture": "cnn", "maxlen": 7}, "cnn needs maxlen >= 8"),
    ("word_vectors", {"architecture": "dpcnn", "maxlen": 94}, "dpcnn needs maxlen >= 95"),
])
def test_what_cannot_be_built_is_one_line(inputs, fields, message):
    config = small_config(fields.pop("architecture", "gru"), **fields)
    with pytest.raises(ConfigurationError, match=message):
        build_classifier(config, inputs)


# -- every architecture -----------------------------------------------------------------------
@pytest.mark.parametrize("inputs", ["word_ids", "word_vectors"])
@pytest.mark.parametrize("name", WORD_ARCHITECTURES)
def test_builds_gives_probabilities_and_a_weighted_loss(name, inputs):
    config = small_config(name)
    model = build_classifier(config, inputs)
    batch = word_batch(config, inputs)
    probabilities = model(batch)
    assert model.output_activation == "sigmoid"
    assert probabilities.shape == (4, 3) and probabilities.dtype == tf.float32
    assert np.all((probabilities.numpy() > 0) & (probabilities.numpy() < 1))
    losses = model.loss_per_example(batch, probabilities).numpy()
    expected = keras.losses.binary_crossentropy(batch["labels"], probabilities).numpy()
    assert losses.shape == (4,) and np.all(np.isfinite(losses))
    np.testing.assert_allclose(losses, expected, rtol=1e-6)
    weights = np.array([2.0, 0.0, 1.0, 0.5], np.float32)
    weighted = model.loss_per_example(dict(batch, example_weights=weights), probabilities)
    np.testing.assert_allclose(weighted.numpy(), losses * weights, rtol=1e-6)


def separable_batch(config, inputs):
    """Texts of class 0 hold word 2, of class 1 word 3, of class 2 word 4, among padding."""
    batch = word_batch(config, inputs, rows=12, seed=1)
    classes = np.arange(12) % 3
    ids = np.zeros((12, config.maxlen), np.int32)
    ids[:, :3] = (2 + classes)[:, None]
    if inputs == "word_ids":
        batch["word_ids"] = ids
    else:
        table = np.random.default_rng(2).normal(size=(VOCAB, WIDTH)).astype(np.float32)
        table[0] = 0.0
        batch["word_vectors"] = table[ids]
    return batch


@pytest.mark.parametrize("name", WORD_ARCHITECTURES)
def test_a_few_steps_lower_the_loss(name):
    inputs = "word_ids" if name in ("gru", "cnn", "dpcnn") else "word_vectors"
    keras.utils.set_random_seed(3)
    config = small_config(name, dropout=0.0, recurrent_units=8, dense_size=8)
    model = build_classifier(config, inputs)
    batch = separable_batch(config, inputs)
    optimizer = keras.optimizers.Adam(0.02)

    def loss():
        return tf.reduce_mean(model.loss_per_example(batch, model(batch, training=True)))

    before = float(loss())
    for _ in range(6):
        with tf.GradientTape() as tape:
            value = loss()
        gradients = tape.gradient(value, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    assert float(loss()) < 0.9 * before
    if inputs == "word_ids":  # <PAD>'s row got no update
        assert not np.any(model.word_embedding.embeddings.numpy()[0])


def test_no_mask_padding_is_read():
    """DeLFT reads its padding: a text's output changes with the padded width (maxlen)."""
    short, long = small_config("gru_simple", maxlen=8), small_config("gru_simple", maxlen=16)
    model = build_classifier(short, "word_ids")
    ids = np.array([[3, 4, 5, 0, 0, 0, 0, 0]], np.int32)
    wider = np.concatenate([ids, np.zeros_like(ids)], axis=1)
    assert long.maxlen == wider.shape[1]
    assert not np.allclose(model({"word_ids": ids}), model({"word_ids": wider}))


# -- configs round trip -----------------------------------------------------------------------
def round_trip(layer, *args):
    """A layer rebuilt from its config, given the first one's weights, computes the same."""
    first = layer(*args)
    copy = type(layer).from_config(layer.get_config())
    copy(*args)
    copy.set_weights(layer.get_weights())
    assert copy.get_config() == layer.get_config()
    np.testing.assert_allclose(np.asarray(copy(*args)), np.asarray(first), atol=1e-6)


def test_layer_configs_round_trip():
    vectors = tf.random.normal([2, 8, 5], seed=1)
    full = tf.constant([8, 8])
    round_trip(PaddedEmbedding(10, 4), tf.constant([[1, 0, 3]]))
    round_trip(MaxAndMeanPooling(), vectors)
    round_trip(ForwardGRU(3, return_sequences=False), vectors, full)
    round_trip(ForwardLSTM(3), vectors, full)
    round_trip(LayerStack(RNN_RECIPES["gru_lstm"], units=3, dense_size=2), vectors)
    round_trip(LayerStack(CNN_RECIPES["lstm_cnn"], units=3, dense_size=2), vectors)
    round_trip(DPCNN(units=3), tf.random.normal([2, 95, 5], seed=2))


@pytest.mark.parametrize("name", ["gru", "cnn3"])
def test_model_config_and_weights_round_trip(name, tmp_path):
    config = small_config(name)
    model = build_classifier(config, "word_ids")
    copy = TextClassifier.from_config(model.get_config())
    batch = word_batch(config, "word_ids")
    copy(batch)
    assert copy.encoder.steps == list(RNN_RECIPES.get(name) or CNN_RECIPES[name])
    model.save_weights(tmp_path / "model.weights.h5")
    copy.load_weights(tmp_path / "model.weights.h5")
    same_outputs(model, copy, batch)


def test_forward_gru_is_keras_gru():
    """ForwardGRU and ForwardLSTM compute what Keras' GRU and LSTM do with the same weights."""
    vectors = tf.random.normal([2, 7, 5], seed=4)
    full = tf.constant([7, 7])
    ours, keras_gru = ForwardGRU(3, return_sequences=False), keras.layers.GRU(3)
    ours(vectors, full)
    keras_gru(vectors)
    ours.set_weights(keras_gru.get_weights())
    np.testing.assert_allclose(ours(vectors, full), keras_gru(vectors), atol=1e-5)
    ours, keras_lstm = ForwardLSTM(3), keras.layers.LSTM(3, return_sequences=True)
    ours(vectors, full)
    keras_lstm(vectors)
    ours.set_keras_weights(keras_lstm.get_weights(), None)
    np.testing.assert_allclose(ours(vectors, full), keras_lstm(vectors), atol=1e-5)


def test_forward_gru_gradients_are_keras_gru_gradients():
    """ForwardGRU's written-out backward recursion gives Keras' GRU's gradients (inputs and
    weights), every state read and the last one alone."""
    vectors = tf.random.normal([3, 6, 5], seed=7)
    full = tf.constant([6, 6, 6])
    upstream = tf.random.normal([3, 6, 4], seed=8)
    for return_sequences in (True, False):
        ours = ForwardGRU(4, return_sequences=return_sequences)
        reference = keras.layers.GRU(4, return_sequences=return_sequences)
        ours(vectors, full)
        reference(vectors)
        ours.set_weights([w + 0.3 for w in reference.get_weights()])
        reference.set_weights(ours.get_weights())
        gradients = []
        runs = ((ours, lambda: ours(vectors, full)), (reference, lambda: reference(vectors)))
        for layer, run in runs:
            with tf.GradientTape() as tape:
                tape.watch(vectors)
                outputs = run()
                loss = tf.reduce_sum(outputs * (upstream if return_sequences else upstream[:, -1]))
            gradients.append(tape.gradient(loss, [vectors] + layer.trainable_variables))
        for got, expected in zip(*gradients):
            np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)


# -- DeLFT 0.4.6's gru weights ----------------------------------------------------------------
def write_delft0_layout(model, path):
    """``model``'s weights as DeLFT 0.4.6 (Keras 2.9 ``save_weights``) wrote copyright_gru's."""
    grus = model.encoder.layers_of(BiGRU)
    dense = model.encoder.stack[model.encoder.steps.index("dense")]
    empty = ("input_1", "dropout", "global_max_pooling1d", "global_average_pooling1d",
             "concatenate", "top_level_model_weights")
    with h5py.File(path, "w") as out:
        out.attrs["layer_names"] = [n.encode() for n in ("input_1", "bidirectional", "dropout",
                                                         "bidirectional_1", "dense", "dense_1")]
        cell = 1
        for name, layer in (("bidirectional", grus[0]), ("bidirectional_1", grus[1])):
            group, names = out.create_group(name), []
            for direction, variables in zip(("forward", "backward"), layer.direction_variables()):
                for role, variable in zip(("kernel", "recurrent_kernel", "bias"), variables):
                    weight = (f"{name}/{direction}_gru{name[len('bidirectional'):]}/"
                              f"gru_cell_{cell}/{role}:0")
                    group[weight] = variable.numpy()
                    names.append(weight.encode())
                cell += 1
            group.attrs["weight_names"] = names
        for name, layer in (("dense", dense), ("dense_1", model.output_layer)):
            group = out.create_group(name)
            group[f"{name}/kernel:0"], group[f"{name}/bias:0"] = layer.get_weights()
            group.attrs["weight_names"] = [f"{name}/kernel:0".encode(), f"{name}/bias:0".encode()]
        for name in empty:
            out.create_group(name).attrs["weight_names"] = np.array([], dtype=np.float64)


def test_delft0_gru_weights_onto_our_gru(tmp_path):
    config = small_config("gru", maxlen=7, recurrent_units=5, dense_size=4)
    original = build_classifier(config, "word_vectors")
    write_delft0_layout(original, tmp_path / "model_weights.hdf5")
    weights = read_delft0_classifier_weights(tmp_path)  # the folder
    assert (weights.recurrent_units, weights.word_embedding_size, weights.dense_size,
            weights.n_classes) == (5, WIDTH, 4, 3)
    shaped = weights.shaped_config(small_config("gru", maxlen=7))
    assert (shaped.recurrent_units, shaped.dense_size) == (5, 4)
    model = build_classifier(shaped, "word_vectors")
    assign_delft0_weights(model, tmp_path / "model_weights.hdf5")
    same_outputs(original, model, word_batch(config, "word_vectors"))

    narrower = build_classifier(small_config("gru", maxlen=7), "word_vectors")  # 4 units
    with pytest.raises(ModelLoadError, match=r"model_weights.hdf5: forward_kernel of bigru_0 "
                                             r"has shape \(6, 15\) in the file, \(6, 12\)"):
        assign_delft0_weights(narrower, weights)
    with pytest.raises(ModelLoadError, match="onto a gru model over word vectors"):
        assign_delft0_weights(build_classifier(small_config("gru_simple"), "word_vectors"),
                              weights)


def test_delft0_files_that_are_not_a_gru_are_one_line(tmp_path):
    config = small_config("gru", maxlen=7)
    write_delft0_layout(build_classifier(config, "word_vectors"), tmp_path / "w.hdf5")
    with h5py.File(tmp_path / "w.hdf5", "a") as out:
        del out["dense_1"]
    with pytest.raises(ModelLoadError, match=r"w.hdf5: 2 bidirectional and 1 dense"):
        read_delft0_classifier_weights(tmp_path / "w.hdf5")
    with h5py.File(tmp_path / "w.hdf5", "a") as out:
        group = out.create_group("dense_1")
        group["dense_1/kernel:0"], group["dense_1/bias:0"] = np.zeros((2, 3)), np.zeros(3)
        group.attrs["weight_names"] = [b"dense_1/kernel:0", b"dense_1/bias:0"]
    with pytest.raises(ModelLoadError, match=r"w.hdf5: the output kernel has shape \(2, 3\)"):
        read_delft0_classifier_weights(tmp_path / "w.hdf5")
    with pytest.raises(ModelLoadError, match="no such weights file"):
        read_delft0_classifier_weights(tmp_path / "missing")


def test_grobid_copyright_gru_shapes():
    folder = GROBID_MODELS / "copyright_gru"
    if not (folder / "model_weights.hdf5").is_file():
        pytest.skip(f"GROBID's shipped copyright_gru is absent: {folder}")
    weights = read_delft0_classifier_weights(folder)
    assert read_delft0_shapes(folder) == {"recurrent_units": 64, "word_embedding_size": 300,
                                          "dense_size": 32, "n_classes": 3}
    assert [d[0][0].shape for d in weights.recurrent] == [(300, 192), (128, 192)]


# -- bert -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_checkpoints(tmp_path_factory):
    return {kind: write_tiny_checkpoint(kind, str(tmp_path_factory.mktemp(kind)))
            for kind in ("bert", "distilbert", "roberta")}


def token_batch(rows=3, width=10, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 40, (rows, width)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    ids[1, 6:] = 1
    return {"token_ids": ids, "padding_mask": mask, "segment_ids": np.zeros_like(ids),
            "labels": np.eye(3, dtype=np.float32)[np.arange(rows) % 3]}


@pytest.mark.parametrize("kind", ["bert", "distilbert", "roberta"])
def test_bert_on_tiny_checkpoints(kind, tiny_checkpoints, tmp_path):
    config = ModelConfig(architecture="bert", list_classes=CLASSES, maxlen=16,
                         transformer_name=tiny_checkpoints[kind])
    model = build_classifier(config, "transformer")
    batch = token_batch()
    probabilities = model(batch).numpy()
    assert model.output_activation == "softmax" and probabilities.shape == (3, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    losses = model.loss_per_example(batch, tf.constant(probabilities)).numpy()
    np.testing.assert_allclose(losses, -np.log((probabilities * batch["labels"]).sum(axis=1)),
                               rtol=1e-5)
    # a saved classifier's transformer/ copy: its config.json only, weights set next
    copy_dir = tmp_path / "transformer"
    copy_dir.mkdir()
    shutil.copy(os.path.join(tiny_checkpoints[kind], "config.json"), copy_dir)
    rebuilt = build_classifier(ModelConfig(architecture="bert", list_classes=CLASSES, maxlen=16),
                               "transformer", transformer_dir=str(copy_dir), pretrained=False)
    assert not np.allclose(rebuilt(batch), probabilities, atol=1e-4)
    rebuilt.set_weights(model.get_weights())
    np.testing.assert_allclose(rebuilt(batch), probabilities, atol=1e-6)
    # the layer's config rebuilds the encoder without the checkpoint
    copy = FirstTokenEncoder.from_config(model.encoder.get_config())
    copy(batch)
    copy.set_weights(model.encoder.get_weights())
    same_outputs(model.encoder, copy, batch)


def test_bert_errors_are_one_line(tiny_checkpoints, tmp_path):
    config = ModelConfig(architecture="bert", list_classes=CLASSES, maxlen=300,
                         transformer_name=tiny_checkpoints["bert"])
    with pytest.raises(ConfigurationError, match="maxlen 300 exceeds the 64 positions"):
        build_classifier(config, "transformer")
    with pytest.raises(ConfigurationError, match="bert reads transformer, not word_ids"):
        build_classifier(config, "word_ids")
    config.maxlen = 16
    no_weights = tmp_path / "transformer"
    no_weights.mkdir()
    shutil.copy(os.path.join(tiny_checkpoints["bert"], "config.json"), no_weights)
    with pytest.raises(ModelLoadError, match="model.safetensors is missing"):
        build_classifier(config, "transformer", transformer_dir=str(no_weights))
