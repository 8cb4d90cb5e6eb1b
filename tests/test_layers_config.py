"""Every custom layer is registered with Keras and survives serialisation: ``get_config`` ->
``from_config`` (through Keras' own serialize/deserialize, as keras-hub's ``run_layer_test``
checks) rebuilds a layer that, given the same weights, gives the same outputs."""
import keras
import numpy as np
import pytest

from delft.sequenceLabelling.layers.bigru import BiGRU
from delft.sequenceLabelling.layers.bilstm import BiLSTM
from delft.sequenceLabelling.layers.char_cnn import CharCNN
from delft.sequenceLabelling.layers.char_encoder import CharEncoder
from delft.sequenceLabelling.layers.crf import ChainCRF
from delft.sequenceLabelling.layers.feature_encoder import FeatureEncoder
from delft.sequenceLabelling.layers.scaled_crf import ScaledChainCRF
from delft.sequenceLabelling.layers.scaled_dense import ScaledDense

RNG = np.random.default_rng(0)
FLOATS = RNG.standard_normal((2, 4, 5)).astype("float32")
LENGTHS = np.array([4, 2], "int32")
CHARS = np.array([[[2, 3, 0], [4, 0, 0], [2, 3, 0], [0, 0, 0]],
                  [[5, 6, 7], [1, 0, 0], [0, 0, 0], [0, 0, 0]]], "int32")
FEATURES = np.array([[[2, 3], [1, 0], [3, 2], [0, 0]], [[2, 2], [3, 3], [0, 0], [0, 0]]], "int32")
POTENTIALS = RNG.standard_normal((2, 4, 3)).astype("float32")


def crf_outputs(layer):
    tags, scores = layer.decode(POTENTIALS, LENGTHS)
    loss = layer.negative_log_likelihood(POTENTIALS, np.array([[0, 1, 2, 1], [2, 0, 0, 0]]),
                                         LENGTHS)
    return [layer(POTENTIALS), tags, scores, loss]


CASES = {
    "ChainCRF": (lambda: ChainCRF(3, name="crf"), crf_outputs),
    "ScaledChainCRF": (lambda: ScaledChainCRF(3, multiplier=50.0, name="crf"), crf_outputs),
    "ScaledDense": (lambda: ScaledDense(3, multiplier=10.0), lambda layer: [layer(FLOATS)]),
    "BiLSTM": (lambda: BiLSTM(3, return_sequences=True),
               lambda layer: [layer(FLOATS, LENGTHS)]),
    "BiLSTM-final-states": (lambda: BiLSTM(3), lambda layer: [layer(FLOATS, LENGTHS)]),
    "BiLSTM-recurrent-dropout": (lambda: BiLSTM(3, return_sequences=True, recurrent_dropout=0.3),
                                 lambda layer: [layer(FLOATS, LENGTHS)]),
    "CharEncoder": (lambda: CharEncoder(vocab_size=10, embedding_size=4, lstm_units=3),
                    lambda layer: [layer(CHARS)]),
    "FeatureEncoder": (lambda: FeatureEncoder([4, 5], embedding_size=2),
                       lambda layer: [layer(FEATURES)]),
    "FeatureEncoder-lstm": (lambda: FeatureEncoder([4, 5], embedding_size=2, lstm_units=3,
                                                   encoder="lstm"),
                            lambda layer: [layer(FEATURES)]),
    "CharEncoder-reads-padding": (lambda: CharEncoder(vocab_size=10, embedding_size=4,
                                                      lstm_units=3, reads_padding=True),
                                  lambda layer: [layer(CHARS)]),
    "CharCNN": (lambda: CharCNN(vocab_size=10, embedding_size=4, filters=3, kernel_size=3),
                lambda layer: [layer(CHARS)]),
    "CharCNN-reads-padding": (lambda: CharCNN(vocab_size=10, embedding_size=4, filters=3,
                                              kernel_size=3, reads_padding=True),
                              lambda layer: [layer(CHARS)]),
    "BiGRU": (lambda: BiGRU(3), lambda layer: [layer(FLOATS, LENGTHS)]),
    "BiGRU-recurrent-dropout": (lambda: BiGRU(3, recurrent_dropout=0.3),
                                lambda layer: [layer(FLOATS, LENGTHS)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_config_round_trip_gives_the_same_outputs(case):
    make, outputs = CASES[case]
    layer = make()
    expected = outputs(layer)
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"].startswith("delft>"), "registered under the delft package"
    copy = keras.saving.deserialize_keras_object(serialized)
    assert type(copy) is type(layer)
    assert copy.get_config() == layer.get_config()
    outputs(copy)  # builds its weights
    assert [w.shape for w in copy.weights] == [w.shape for w in layer.weights]
    copy.set_weights(layer.get_weights())
    for got, want in zip(outputs(copy), expected):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_every_layer_module_is_covered():
    import pkgutil

    import delft.sequenceLabelling.layers as layers

    modules = {m.name for m in pkgutil.iter_modules(layers.__path__)}
    covered = {type(make()).__module__.rsplit(".", 1)[1] for make, _ in CASES.values()}
    assert modules == covered
