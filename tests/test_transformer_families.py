"""Each encoder family: BERT, DistilBERT, RoBERTa, XLM-RoBERTa, ELECTRA and DeBERTa-v3 (Hugging
Face's model type "deberta-v2"). Their hidden states match PyTorch's (transformers' own models, in
tests/data/transformer_reference.npz), each trains, tags and reloads, a training step on 2
replicas is the step on one (RoBERTa's and XLM-RoBERTa's position ids start after the padding
index: rows padded differently on each replica must not move them), and what keras-hub's encoders
cannot follow is refused in one line. The checkpoints are tests/tiny_transformers.py's.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import delft  # noqa: E402,F401  (configures devices before TensorFlow starts)
from conftest import loaded_sequence  # noqa: E402
from test_transformer import REFERENCE, date_like, encoder_states  # noqa: E402
from tiny_transformers import MODEL_TYPES, write_tiny_checkpoint  # noqa: E402

from delft.sequenceLabelling import Sequence  # noqa: E402
from delft.sequenceLabelling.transformers.checkpoint import SUPPORTED_MODEL_TYPES  # noqa: E402
from delft.sequenceLabelling.transformers.encoder import ENCODERS, load_encoder  # noqa: E402
from delft.sequenceLabelling.transformers.preprocess import TransformerPreprocessor  # noqa: E402
from delft.utilities.errors import ConfigurationError  # noqa: E402

# the families added to keras-hub's three, and the keras-hub backbone each is
BACKBONES = {"xlm-roberta": "XLMRobertaBackbone", "electra": "ElectraBackbone",
             "deberta-v2": "DebertaV3Backbone"}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {t: write_tiny_checkpoint(t, str(root / t)) for t in MODEL_TYPES}


# -- encoders against PyTorch --------------------------------------------------------------------
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_hidden_states_match_pytorch(checkpoints, model_type):
    from safetensors.numpy import load_file

    reference = np.load(REFERENCE)
    weights = load_file(os.path.join(checkpoints[model_type], "model.safetensors"))
    fingerprint = sum(float(np.abs(w).astype(np.float64).sum()) for w in weights.values())
    assert fingerprint == pytest.approx(float(reference[f"{model_type}_fingerprint"]), rel=1e-9), \
        "the tiny checkpoint generator changed: rerun tests/data/make_transformer_reference.py"
    ids, mask = reference[f"{model_type}_ids"], reference[f"{model_type}_mask"]
    states = encoder_states(load_encoder(checkpoints[model_type]), model_type, ids, mask)
    real = mask.astype(bool)
    np.testing.assert_allclose(states[real], reference[f"{model_type}_hidden"][real], atol=2e-5)


def test_deberta_relative_buckets_match_hugging_face_at_every_distance():
    """keras-hub's log buckets against Hugging Face's make_log_bucket_position (written out in
    numpy; equal to torch's output) for DeBERTa-v3's 256 buckets over 512 positions."""
    from delft.sequenceLabelling.transformers.encoder import keras_hub_module

    attention = keras_hub_module("keras_hub.src.models.deberta_v3.disentangled_self_attention")
    layer = attention.DisentangledSelfAttention(num_heads=2, hidden_dim=8,
                                                max_position_embeddings=512, bucket_size=256)
    distance = np.arange(-511, 512).astype("int32")
    mid = 128
    size = np.where((distance < mid) & (distance > -mid), mid - 1, np.abs(distance))
    size = size.astype(np.float32)
    log_bucket = np.ceil(np.log(size / np.float32(mid)) / np.log(np.float32(511 / mid)) *
                         np.float32(mid - 1)) + mid
    theirs = np.where(size <= mid, distance, log_bucket * np.sign(distance)).astype(np.int64)
    np.testing.assert_array_equal(np.asarray(layer._make_log_bucket_position(distance)), theirs)


# -- training, tagging, reloading ----------------------------------------------------------------
@pytest.mark.parametrize("model_type", sorted(BACKBONES))
def test_each_family_trains_a_step_tags_and_reloads(checkpoints, tmp_path, model_type):
    x, y, _ = date_like(12)
    model = Sequence("tiny", architecture="BERT_CRF", transformer_name=checkpoints[model_type],
                     max_epoch=1, batch_size=6, learning_rate=1e-3)
    model.train(x, y)
    assert type(model.model.encoder).__name__ == BACKBONES[model_type]
    texts = x[:3] + [["unbelievably", "Zürich", "2005"]]
    tagged = model.tag(texts)
    assert [[t for t, _ in seq] for seq in tagged] == texts
    model.save(str(tmp_path))
    saved = json.loads((tmp_path / "tiny" / "transformer" / "config.json").read_text())
    assert saved["model_type"] == model_type
    loaded = loaded_sequence("tiny", str(tmp_path))
    assert loaded.tag(texts) == tagged
    for mine, theirs in zip(model.model.get_weights(), loaded.model.get_weights()):
        np.testing.assert_array_equal(mine, theirs)


def test_deberta_v3_tokenizer_from_its_spm_model_alone(checkpoints, tmp_path):
    """microsoft/deberta-v3-* ship spm.model and tokenizer_config.json, no tokenizer.json."""
    import io
    import shutil

    import sentencepiece

    path = str(tmp_path / "deberta")
    shutil.copytree(checkpoints["deberta-v2"], path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        os.remove(os.path.join(path, name))
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["Received 12 June 2005 accepted 3rd July of the"] * 20),
        model_writer=model, vocab_size=30, model_type="unigram", pad_id=0, bos_id=1, eos_id=2,
        unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]", eos_piece="[SEP]", unk_piece="[UNK]",
        minloglevel=2)
    with open(os.path.join(path, "spm.model"), "wb") as out:
        out.write(model.getvalue())
    with open(os.path.join(path, "tokenizer_config.json"), "w") as out:
        json.dump({"do_lower_case": False, "vocab_type": "spm",
                   "tokenizer_class": "DebertaV2Tokenizer"}, out)
    p = TransformerPreprocessor(path)
    words = ["Received", "12", "June"]
    batch = p.padded_batch(p.encode([words]), np.array([0]))
    encoded = p.tokenizer(words, is_split_into_words=True)
    np.testing.assert_array_equal(batch["input_ids"][0], encoded["input_ids"])
    assert encoded["input_ids"][0] == 1 and encoded["input_ids"][-1] == 2  # [CLS] ... [SEP]


# -- checkpoints refused -------------------------------------------------------------------------
def test_unsupported_model_type_is_named(tmp_path):
    path = write_tiny_checkpoint("xlnet", str(tmp_path / "xlnet"))
    with pytest.raises(ConfigurationError, match="'xlnet'") as error:
        Sequence("tiny", architecture="BERT_CRF", transformer_name=path).train(*date_like(4)[:2])
    message = str(error.value)
    assert "\n" not in message and all(t in message for t in SUPPORTED_MODEL_TYPES)


def test_deberta_settings_keras_hub_fixes_otherwise_are_refused(tmp_path):
    path = write_tiny_checkpoint("deberta-v2", str(tmp_path / "xlarge"))
    config_file = os.path.join(path, "config.json")
    with open(config_file) as stream:
        config = json.load(stream)
    # deberta-v2-xlarge's convolution after the first layer; absolute positions
    config.update(conv_kernel_size=3, position_biased_input=True)
    with open(config_file, "w") as out:
        json.dump(config, out)
    with pytest.raises(ConfigurationError) as error:
        TransformerPreprocessor(path)
    message = str(error.value)
    assert "\n" not in message and "xlarge" in message
    assert "conv_kernel_size=3" in message and "position_biased_input=True" in message
    assert "relative_attention" not in message  # the settings that fit are not named


def test_every_checkpoint_model_type_has_an_encoder():
    assert set(ENCODERS) == set(SUPPORTED_MODEL_TYPES)


# -- 1 and 2 replicas ----------------------------------------------------------------------------
REPLICA_SCRIPT = textwrap.dedent("""
    import json, sys, tempfile
    import numpy as np
    sys.path.insert(0, {tests!r})
    import delft
    import keras
    from delft.utilities import devices
    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.batching import dummy_batch
    from delft.sequenceLabelling.config import ModelConfig, TrainingConfig
    from delft.sequenceLabelling.models import architecture, new_preprocessor
    from delft.sequenceLabelling.models.transformer import build_transformer_model
    from delft.sequenceLabelling.trainer import Trainer
    from test_transformer import date_like
    from tiny_transformers import write_tiny_checkpoint

    x, y, _ = date_like(7)
    everything = {{}}
    for model_type in {model_types!r}:
        path = write_tiny_checkpoint(model_type, tempfile.mkdtemp())
        config = ModelConfig(architecture="BERT_CRF", transformer_name=path)
        p = new_preprocessor(config)
        p.fit(x, y)
        corpus, labels = p.encode(x), p.encode_labels(y)
        out, initial = {{}}, None
        for multi in (False, True):
            strategy = devices.get_strategy(multi)
            with strategy.scope():
                model = build_transformer_model(config, p, architecture("BERT_CRF"), dropout=0.0)
                model(dummy_batch(p.batch_signature(False)))
            if initial is None:
                initial = model.get_weights()
                out["initial"] = [w.tolist() for w in initial]
            model.set_weights(initial)
            result = {{"replicas": strategy.num_replicas_in_sync}}
            for name in ("sgd", "adamw"):
                model.set_weights(initial)
                # no clipping for SGD: a step twice too large must show, not be clipped away
                training = TrainingConfig(learning_rate=1e-3, max_epoch=1,
                                          clip_gradients=0.0 if name == "sgd" else 5.0)
                trainer = Trainer(model, p, training, strategy, 7, uses_transformer=True)
                if name == "sgd":  # plain SGD: a wrongly scaled gradient shows in the step
                    with strategy.scope():
                        trainer.optimizer = keras.optimizers.SGD(0.1)
                        trainer.optimizer.build(model.trainable_variables)
                    steps = 1
                else:  # delft's AdamW + warm-up (its step 1 has learning rate 0: take 2)
                    trainer.build_optimizer(2)
                    steps = 2
                batches = [np.arange(7)] * steps
                result[name + "_loss"] = [
                    float(trainer._train_step(trainer.feeder.slices(corpus, rows, labels))[0])
                    for rows in batches]
                result[name] = [w.tolist() for w in model.get_weights()]
            out[str(multi)] = result
        everything[model_type] = out
    if {tag!r}:
        sequence = Sequence("tiny", architecture="BERT_CRF", transformer_name=path, max_epoch=1,
                            batch_size=4)
        sequence.train(x, y, multi_gpu=True)
        everything["tagged"] = [len(s) for s in sequence.tag(x, multi_gpu=True)]
    print("RESULT " + json.dumps(everything))
""")


def replica_steps(tmp_path, model_types, tag=False):
    """REPLICA_SCRIPT's results on 2 logical CPUs: per model type, the weights before, and the
    losses and weights after an SGD step and two AdamW steps on 1 and on 2 replicas; with
    ``tag``, the lengths the last type's BERT_CRF trained and tagged on 2 replicas gives."""
    env = dict(os.environ, DELFT_CPU_REPLICAS="2")
    root = os.path.dirname(HERE)
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    script = REPLICA_SCRIPT.format(tests=HERE, model_types=list(model_types), tag=tag)
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def assert_two_replicas_step_as_one(out):
    """The steps of :func:`replica_steps` for one model type: the same on 1 and 2 replicas."""
    one, two = out["False"], out["True"]
    assert one["replicas"] == 1 and two["replicas"] == 2
    for name in ("sgd", "adamw"):
        np.testing.assert_allclose(two[name + "_loss"], one[name + "_loss"], rtol=1e-4)
        before = [np.asarray(w) for w in out["initial"]]
        step1 = [np.asarray(w) - b for w, b in zip(one[name], before)]
        step2 = [np.asarray(w) - b for w, b in zip(two[name], before)]
        flat1, flat2 = np.concatenate([s.ravel() for s in step1]), np.concatenate(
            [s.ravel() for s in step2])
        assert np.linalg.norm(flat1) > 0  # the step moved the weights
        relative = np.linalg.norm(flat2 - flat1) / np.linalg.norm(flat1)
        print(f"{name}: loss {one[name + '_loss']}, step relative difference {relative:.2e}")
        assert relative < 1e-4, f"{name}: the 2-replica step differs by {relative:.2e}"
        after1 = np.concatenate([np.ravel(w) for w in one[name]])
        after2 = np.concatenate([np.ravel(w) for w in two[name]])
        assert np.linalg.norm(after2 - after1) / np.linalg.norm(after1) < 1e-6


def test_one_step_on_two_replicas_equals_one_device(tmp_path):
    out = replica_steps(tmp_path, ["bert"], tag=True)
    assert_two_replicas_step_as_one(out["bert"])
    assert out["tagged"] == [len(s) for s in date_like(7)[0]]


def test_each_family_steps_on_two_replicas_as_on_one(tmp_path):
    out = replica_steps(tmp_path, sorted(BACKBONES))
    for model_type in sorted(BACKBONES):
        print(model_type)
        assert_two_replicas_step_as_one(out[model_type])
