"""Weights checked against the architecture config.json names, before they are loaded.

Keras loads a weights file by attribute path and skips the file's layers the model lacks: a
config naming BidLSTM over BidLSTM_CRF weights loaded, dropped the CRF and mislabelled a fifth of
the tokens. The layout read from the model (save_own_variables) must be the one Keras writes, for
every family; a config that does not match its weights is one line naming the layers.
"""
import collections
import json
import shutil

import pytest

from conftest import MODEL_NAME, loaded_sequence
from delft.sequenceLabelling import models
from delft.sequenceLabelling.batching import dummy_batch
from delft.sequenceLabelling.config import ModelConfig
from delft.sequenceLabelling.weights_layout import file_layers, model_layers
from delft.sequenceLabelling.wrapper import CONFIG_FILE, WEIGHTS_FILE
from delft.utilities.errors import ModelLoadError

ARCHITECTURES = ["BidLSTM_CRF", "BidLSTM", "BidLSTM_CRF_FEATURES", "BERT_CRF",
                 "BERT_CRF_CHAR_FEATURES"]


def signatures(layers):
    return collections.Counter(signature for _, signature in layers)


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_the_model_layout_is_the_one_keras_writes(trained_date, tmp_path, name):
    from tiny_transformers import write_tiny_checkpoint

    checkpoint = write_tiny_checkpoint("bert", str(tmp_path / "bert")) if "BERT" in name else None
    config = ModelConfig(architecture=name, transformer_name=checkpoint, max_sequence_length=30)
    preprocessor = models.new_preprocessor(config)
    features = trained_date.f_train[:20] if models.architecture(name).features else None
    preprocessor.fit(trained_date.x_train[:20], trained_date.y_train[:20], features)
    model = models.build_model(config, preprocessor)
    model(dummy_batch(preprocessor.batch_signature(False)))
    path = str(tmp_path / WEIGHTS_FILE)
    model.save_weights(path)
    expected, found = model_layers(model), file_layers(path)
    assert len(expected) >= 4 and signatures(expected) == signatures(found)
    assert sorted(name for name, _ in expected) == sorted(name for name, _ in found)


@pytest.fixture
def model_copy(tmp_path, trained_date):
    models_dir = tmp_path / "models"
    shutil.copytree(trained_date.models_dir, models_dir)
    return models_dir, models_dir / MODEL_NAME


def with_config(model_dir, **changes):
    path = model_dir / CONFIG_FILE
    values = json.loads(path.read_text())
    values.update(changes)
    path.write_text(json.dumps(values))


def load_error(models_dir):
    with pytest.raises(ModelLoadError) as info:
        loaded_sequence(MODEL_NAME, str(models_dir))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_bidlstm_config_over_bidlstm_crf_weights(model_copy, trained_date):
    models_dir, model_dir = model_copy
    with_config(model_dir, architecture="BidLSTM")
    message = load_error(models_dir)
    labels = len(loaded_sequence(MODEL_NAME, str(trained_date.models_dir)).p.label_vocabulary)
    assert message == (f"{model_dir / WEIGHTS_FILE}: these weights are not those of the model "
                       f"config.json describes (the file has layer 'crf' ({labels}x{labels}, "
                       f"{labels}, {labels}) that a BidLSTM model has not)")


def test_other_layer_sizes_than_the_weights(model_copy):
    models_dir, model_dir = model_copy
    with_config(model_dir, word_lstm_units=50)
    message = load_error(models_dir)
    assert str(model_dir / WEIGHTS_FILE) in message
    assert "the file has layer 'dense'" in message and "layer 'word_lstm' (50x400" in message
    assert "the BidLSTM_CRF model has layer 'word_lstm' (50x200" in message


def test_a_features_config_over_a_model_without_features(model_copy):
    models_dir, model_dir = model_copy
    with_config(model_dir, architecture="BidLSTM_CRF_FEATURES")
    message = load_error(models_dir)
    assert message.startswith(f"{model_dir}: config.json and preprocessor.json do not describe "
                              "the same model")


def test_a_crf_config_over_weights_without_crf(trained_date, tmp_path):
    from delft.sequenceLabelling import Sequence

    softmax = Sequence(MODEL_NAME, architecture="BidLSTM", max_epoch=1, batch_size=60,
                       max_sequence_length=50)
    softmax.train(trained_date.x_train[:120], trained_date.y_train[:120])
    softmax.save(str(tmp_path))
    with_config(tmp_path / MODEL_NAME, architecture="BidLSTM_CRF")
    message = load_error(tmp_path)
    assert "the BidLSTM_CRF model has layer 'crf' (" in message and "that the file has not" in message


def test_the_same_crf_under_its_other_name_loads(model_copy, trained_date):
    """BidLSTM_ChainCRF is DeLFT's name for the same CRF: same layers, it loads and tags alike."""
    models_dir, model_dir = model_copy
    with_config(model_dir, architecture="BidLSTM_ChainCRF")
    model = loaded_sequence(MODEL_NAME, str(models_dir))
    assert model.tag(trained_date.x_eval, None) == trained_date.model.tag(trained_date.x_eval, None)
