"""DeLFT's ``Classifier``: train, eval, predict, save, load, n-fold, 1 vs 2 replicas, GROBID's
shipped classifier, and what is refused in one line."""
import gzip
import json
import os

import numpy as np
import pytest

from conftest import (GROBID_MODELS, GROBID_MODELS_REFERENCE, REPO_ROOT,
                      assert_within_reordering_floor, delft_stderr_lines, learning_rates,
                      load_module, run_python)
from classifier_data import CLASSES, built_without_dropout, data
from delft.utilities.errors import ModelLoadError

CHECKS = REPO_ROOT / "tests" / "classifier_replica_checks.py"
RECORDED = REPO_ROOT / "tests" / "data" / "classification"
LICENSE_GRU_RECORD = RECORDED / "delft046_license_gru.json.gz"
LICENSE_GRU_RECORDER = RECORDED / "record_delft046_license_gru.py"


def trained(**settings):
    from delft.textClassification import Classifier

    texts, labels = data()
    model = Classifier("copyright_gru", list_classes=CLASSES, maxlen=24, batch_size=32,
                       max_epoch=settings.pop("max_epoch", 6), seed=1, **settings)
    model.train(texts, labels)
    return model


@pytest.fixture(scope="module")
def model():
    return trained()


def test_training_learns_the_classes_and_keeps_the_best_epoch(model):
    texts, labels = data()
    scores = model.eval(texts[:60], labels[:60])
    assert scores["accuracy"] > 0.9 and scores["roc_auc"] > 0.95
    best = min(record["val_loss"] for record in model.history)
    assert model.history and all(np.isfinite(r["loss"]) for r in model.history)
    assert best < model.history[0]["val_loss"]
    assert list(scores["labels"]) == CLASSES  # the table in the classes' order
    assert str(scores).splitlines()[2].split()[0] == "publisher"


def test_the_validation_step_is_prepared_beside_the_first_train_step(monkeypatch):
    """The validation step is traced and run once in a thread of its own while the first train
    step is optimized: traced once in all, and the training is the one that does not prepare
    it."""
    import threading

    from delft.textClassification import trainer

    prepare = trainer.ClassifierTrainer.prepare_validation
    predictors = []

    def recorded(self, validation):
        assert threading.current_thread() is not threading.main_thread()
        predictors.append(self.predictor)
        prepare(self, validation)

    monkeypatch.setattr(trainer.ClassifierTrainer, "prepare_validation", recorded)
    prepared = trained(max_epoch=2)
    [predictor] = predictors
    assert predictor._step.experimental_get_tracing_count() == 1
    monkeypatch.setattr(trainer.ClassifierTrainer, "prepare_validation", lambda self, v: None)
    plain = trained(max_epoch=2)
    assert [(r["loss"], r["val_loss"]) for r in prepared.history] == \
        [(r["loss"], r["val_loss"]) for r in plain.history]
    texts, _ = data()
    np.testing.assert_array_equal(prepared.predict(texts[:8], "array"),
                                  plain.predict(texts[:8], "array"))


def test_a_saturated_roc_auc_stops_training_as_delfts_does():
    """With ``use_roc_auc`` (DeLFT's apps), only a higher validation ROC-AUC is progress: once it
    is 1, ``patience`` epochs later the training stops, and the first epoch that reached it is
    kept."""
    model = trained(max_epoch=40, patience=2, use_roc_auc=True)
    scores = [record["val_roc_auc"] for record in model.history]
    first_best = scores.index(max(scores))
    assert max(scores) == 1.0 and len(scores) == first_best + 3 < 40, scores
    texts, labels = data()
    assert np.allclose(model.predict(texts[:5], "array"),
                       trained(max_epoch=first_best + 1).predict(texts[:5], "array"), atol=1e-6)


def test_early_stopping_keeps_the_epoch_of_lowest_validation_loss():
    """By default the validation loss decides: the epoch of the lowest is kept (its
    predictions are those of a training stopped there, whose last recorded loss is that lowest),
    and training stops ``patience`` epochs after it."""
    texts, labels = data()
    model = trained(max_epoch=40, patience=2, learning_rate=0.02)
    losses = [record["val_loss"] for record in model.history]
    best = losses.index(min(losses))
    assert len(losses) == best + 3 < 40, losses
    alone = trained(max_epoch=best + 1, learning_rate=0.02)
    assert np.allclose(model.predict(texts[:5], "array"), alone.predict(texts[:5], "array"),
                       atol=1e-6)
    assert alone.history[-1]["val_loss"] == pytest.approx(min(losses), abs=1e-6)


def optimizer_of(architecture, training_config, total_steps=10):
    """The optimizer a ``ClassifierTrainer`` makes for ``architecture`` (no model, no data)."""
    from delft.textClassification.trainer import ClassifierTrainer

    trainer = ClassifierTrainer.__new__(ClassifierTrainer)
    trainer.architecture_name, trainer.uses_transformer = architecture, architecture == "bert"
    trainer.config, trainer.loss_scaling = training_config, False
    return trainer.make_optimizer(total_steps)


@pytest.mark.parametrize("gradient", [1e-6, 1e-4, 1e-2, 1.0])
def test_rmsprop_steps_as_delft_12s_pytorch_rmsprop(gradient):
    """The GRU architectures' RMSprop moves a weight as PyTorch's (DeLFT 1.2.0's: rho 0.9,
    ``lr * g / (sqrt(v) + 1e-7)``) also where gradients are small, as a word's embedding row
    gets them (within 25% where sqrt(v) is near 1e-7); Keras' own epsilon, under the root, made
    a step on gradients of 1e-5 ~100x shorter, of 1e-6 ~1,800x."""
    import tensorflow as tf
    from delft.textClassification.config import TrainingConfig

    optimizer = optimizer_of("gru", TrainingConfig(learning_rate=0.001))
    weight = tf.Variable([0.0])
    velocity, expected = 0.0, 0.0
    for _ in range(3):
        optimizer.apply_gradients([(tf.constant([gradient]), weight)])
        velocity = 0.9 * velocity + 0.1 * gradient ** 2
        expected -= 0.001 * gradient / (np.sqrt(velocity) + 1e-7)
    assert weight.numpy()[0] == pytest.approx(expected, rel=0.25 if gradient < 1e-5 else 1e-2)


@pytest.mark.parametrize("schedule", ["constant", "linear"])
def test_bert_fine_tunes_at_a_constant_rate_unless_told_otherwise(schedule):
    """bert trains at DeLFT 1.2.0's constant 2e-5 by default (the classifier's
    ``transformer_schedule``); ``linear`` is the sequence labeller's warm-up then decay."""
    import keras
    from delft.textClassification.config import TrainingConfig

    config = TrainingConfig() if schedule == "constant" else \
        TrainingConfig(transformer_schedule="linear")
    optimizer = optimizer_of("bert", config, total_steps=100)
    assert isinstance(optimizer, keras.optimizers.AdamW)
    expected = [2e-5] * 4 if schedule == "constant" else [0.0, 2e-5, 1e-5, 0.0]
    np.testing.assert_allclose(learning_rates(optimizer, (0, 10, 55, 100)), expected, atol=1e-12)


def test_predict_json_is_delft_046s_document(model):
    texts = ["Elsevier press rights", "the authors themselves"]
    document = model.predict(texts, "json", use_main_thread_only=True)
    assert set(document) == {"software", "date", "model", "classifications"}
    assert document["software"] == "DeLFT" and document["model"] == "copyright_gru"
    for text, entry in zip(texts, document["classifications"]):
        assert list(entry) == ["text"] + CLASSES and entry["text"] == text
        assert all(isinstance(entry[c], float) and 0 <= entry[c] <= 1 for c in CLASSES)
    array = model.predict(texts, "array")
    assert array.shape == (2, 3)
    np.testing.assert_allclose(array[1], [document["classifications"][1][c] for c in CLASSES])
    assert array[0].argmax() == 0 and array[1].argmax() == 1


def test_save_then_load_gives_the_same_probabilities(model, tmp_path):
    from delft.textClassification import Classifier

    texts = data()[0][:50]
    model.save(str(tmp_path))
    folder = tmp_path / "copyright_gru"
    assert sorted(os.listdir(folder)) == ["config.json", "history.json", "model.weights.h5",
                                          "preprocessor.json", "training_curve.png"]
    config = json.loads((folder / "config.json").read_text())
    assert config["list_classes"] == CLASSES and config["vocab_size"] == len(
        json.loads((folder / "preprocessor.json").read_text())["vocabulary"])
    loaded = Classifier("copyright_gru")
    assert loaded.load(dir_path=str(tmp_path)) is None
    np.testing.assert_array_equal(loaded.predict(texts, "array"), model.predict(texts, "array"))
    loaded.config.batch_size = 7  # what GROBID sets
    loaded.config.max_sequence_length = 3000  # GROBID sets it too; a classifier reads maxlen
    np.testing.assert_allclose(loaded.predict(texts, "array"), model.predict(texts, "array"),
                               atol=1e-6)


def test_the_predict_call_that_traces_ends_with_a_full_collection(model, tmp_path,
                                                                   forced_collections):
    """As ``Sequence.tag`` (tests/test_repetition.py): GROBID calls predict again and again."""
    import gc

    from delft.textClassification import Classifier

    model.save(str(tmp_path))
    loaded = Classifier("copyright_gru")
    loaded.load(dir_path=str(tmp_path))
    enabled = gc.isenabled()
    loaded.predict(["Elsevier press rights"], "json")
    loaded.predict(["the authors themselves"], "json")
    assert forced_collections == [()]  # the first call's, after its trace
    assert gc.isenabled() == enabled


def test_nfold_models_combine_by_geometric_mean(tmp_path):
    from delft.textClassification import Classifier

    folds = trained(fold_number=3, max_epoch=2)
    assert len(folds.models) == 3
    texts = data()[0][:20]
    each = [folds._predictor(m, folds._strategy).predict(folds.p.encode(texts), 32)
            for m in folds.models]
    np.testing.assert_allclose(folds.predict(texts, "array"),
                               np.exp(np.mean(np.log(each), axis=0)), rtol=1e-5)
    folds.save(str(tmp_path))
    assert {"model-0.weights.h5", "model-2.weights.h5"} <= set(os.listdir(tmp_path /
                                                                        "copyright_gru"))
    loaded = Classifier("copyright_gru")
    loaded.load(str(tmp_path))
    np.testing.assert_allclose(loaded.predict(texts, "array"), folds.predict(texts, "array"),
                               atol=1e-6)


@pytest.mark.parametrize("call,expected", [
    (lambda m: m.predict("one text"), "texts must be a list of texts, not a str: to classify "
                                      "one text, pass [text]"),
    (lambda m: m.predict(["a", 3]), "texts[1] must be a text (a str), not a int"),
    (lambda m: m.eval(["a"], ["nobody"]), "evaluation data: class 'nobody' is not one of the "
                                          "model's classes (publisher, authors, undecided)"),
    (lambda m: m.eval(["a", "b"], ["authors"]), "evaluation data has 2 texts and 1 classes"),
])
def test_bad_arguments_are_one_sentence(model, call, expected):
    with pytest.raises((TypeError, ValueError)) as raised:
        call(model)
    assert str(raised.value) == expected


def test_a_damaged_folder_is_one_line(model, tmp_path):
    from delft.textClassification import Classifier

    model.save(str(tmp_path))
    folder = tmp_path / "copyright_gru"
    preprocessor = json.loads((folder / "preprocessor.json").read_text())
    (folder / "preprocessor.json").write_text(json.dumps(dict(preprocessor,
                                                              vocabulary=["a", "b"])))
    with pytest.raises(ModelLoadError, match="vocabulary must be distinct words after <PAD>"):
        Classifier("copyright_gru").load(str(tmp_path))
    (folder / "preprocessor.json").unlink()
    with pytest.raises(ModelLoadError, match="preprocessor.json is missing"):
        Classifier("copyright_gru").load(str(tmp_path))


OTHER_ARCHITECTURES = ["gru_simple", "gru_lstm", "lstm", "bidLstm_simple", "cnn2", "cnn3",
                       "lstm_cnn", "dpcnn"]


@pytest.mark.parametrize("architecture", ["gru", "cnn", "bert", "others"])
def test_one_step_on_two_replicas_equals_one_device(architecture):
    names = OTHER_ARCHITECTURES if architecture == "others" else [architecture]
    done = run_python([CHECKS, *(f"one_step:{name}" for name in names)], timeout=600,
                      DELFT_CPU_REPLICAS=2)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.strip().splitlines()]
    assert [result["check"] for result in results] == [f"one_step:{name}" for name in names]
    for result in results:
        assert_one_step_equal(result)


def assert_one_step_equal(result):
    assert result["variable"] == "MirroredVariable"
    assert result["moved"] > 1e-3  # the step did something
    assert_within_reordering_floor(result["difference"], result["reordering_floor"])
    assert result["loss_1"] == pytest.approx(result["loss_2"], rel=1e-5)


def test_sharded_prediction_keeps_the_order_and_the_values():
    done = run_python([CHECKS, "sharded_prediction"], timeout=300, DELFT_CPU_REPLICAS=2)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows"] == 1001 and result["same_classes"] == 1001
    assert result["difference"] <= 1e-5 and result["texts_in_order"]


# -- bert: rows padded per batch ----------------------------------------------------------------
def varied_texts(count):
    """The test texts cut to 3 to 9 of their words: rows of many widths."""
    texts, labels = data()
    return ([" ".join(texts[i % len(texts)].split()[:3 + i % 7]) for i in range(count)],
            [labels[i % len(labels)] for i in range(count)])


BERT_MAXLEN = 64  # the tiny checkpoint's positions


def untrained_bert(tmp_path, **settings):
    from delft.textClassification import Classifier
    from tiny_transformers import write_tiny_checkpoint

    model = Classifier("copyright_bert", architecture="bert", list_classes=CLASSES,
                       maxlen=BERT_MAXLEN, early_stop=False, seed=2, learning_rate=1e-3,
                       transformer_name=write_tiny_checkpoint("bert", str(tmp_path / "tiny")),
                       **settings)
    return built_without_dropout(model, varied_texts(48)[0], model._use_strategy(False))


def test_bert_rows_are_padded_to_their_batch_and_probabilities_do_not_change(tmp_path):
    from delft.textClassification import Classifier

    model = untrained_bert(tmp_path, batch_size=16)
    texts, _ = varied_texts(48)
    corpus = model.p.encode(texts)
    np.testing.assert_array_equal(corpus.row_length, corpus.data["padding_mask"].sum(axis=1))
    assert corpus.row_length.min() < corpus.row_length.max() < BERT_MAXLEN
    batch = model.p.padded_batch(corpus, np.array([0, 5]))
    assert batch["token_ids"].shape == (2, corpus.row_length[[0, 5]].max())
    # every row maxlen wide, as before: the probabilities of padded-per-batch rows are those
    full = {key: corpus.data[key] for key in ("token_ids", "padding_mask", "segment_ids")}
    expected = model.model(full).numpy()
    assert corpus.data["token_ids"].shape == (48, BERT_MAXLEN)
    for batch_size in (16, 1):
        probabilities = model.predict(texts, "array", batch_size=batch_size)
        np.testing.assert_allclose(probabilities, expected, atol=1e-6)
    # and a saved bert classifier, loaded, gives them (its folder holds the tokenizer and config)
    model.save(str(tmp_path / "models"))
    loaded = Classifier("copyright_bert")
    loaded.load(dir_path=str(tmp_path / "models"))
    np.testing.assert_allclose(loaded.predict(texts, "array"), expected, atol=1e-6)


def test_bert_training_in_length_groups_steps_as_on_maxlen_rows(tmp_path):
    """Two steps on one batch of 48 texts, its rows padded per length group and padded to
    maxlen, against the floor: maxlen rows in reverse order, the same steps in another float32
    summation order."""
    from delft.textClassification.trainer import ClassifierTrainer

    texts, labels = varied_texts(48)
    one_hot = np.eye(3, dtype=np.float32)[[CLASSES.index(label) for label in labels]]
    updates = {}
    for run, order in (("per group", slice(None)), ("maxlen", slice(None)),
                       ("maxlen reversed", slice(None, None, -1))):
        model = untrained_bert(tmp_path, max_epoch=2, batch_size=48)
        trainer = ClassifierTrainer(model.model, model.p, model.training_config,
                                    model._use_strategy(False), 48, "bert", True)
        assert trainer.feeder.groups == 2
        corpus = model.p.encode(texts[order])
        if run != "per group":  # what every batch was before: maxlen wide
            corpus.row_length[:] = BERT_MAXLEN
        start = model.model.get_weights()
        trainer.train(corpus, model.p.label_rows(one_hot[order]))
        updates[run] = np.concatenate([(w - s).ravel()
                                       for w, s in zip(model.model.get_weights(), start)])
    full = updates["maxlen"]
    assert np.abs(full).max() > 1e-3

    def difference(run):
        return float(np.linalg.norm(updates[run] - full) / np.linalg.norm(full))

    assert_within_reordering_floor(difference("per group"), difference("maxlen reversed"))


# -- GROBID's shipped classifier ---------------------------------------------------------------

def assert_delft046_probabilities(result, expected, classes):
    """``result`` (our ``predict(texts, "json")``) has DeLFT 0.4.6's classifications
    ``expected``: the same texts, keys in the same order, probabilities within 1e-4."""
    assert len(result["classifications"]) == len(expected) == 120
    worst = 0.0
    for got, want in zip(result["classifications"], expected):
        assert list(got) == list(want) and got["text"] == want["text"]
        worst = max(worst, max(abs(got[c] - want[c]) for c in classes))
    assert worst <= 1e-4, worst


@pytest.mark.skipif(not (GROBID_MODELS_REFERENCE / "delft-0.4.6" / "copyright_gru.json").is_file(),
                    reason="the shared sample of GROBID's models is absent")
def test_shipped_copyright_gru_gives_delft_046s_probabilities(standin_registry):
    from delft.textClassification import Classifier

    reference = json.loads((GROBID_MODELS_REFERENCE / "delft-0.4.6" /
                            "copyright_gru.json").read_text(encoding="utf-8"))
    model = Classifier("copyright_gru")
    model.load(dir_path=str(GROBID_MODELS))
    result = model.predict(reference["texts"], "json", use_main_thread_only=True)
    assert_delft046_probabilities(result, reference["result"]["classifications"],
                                  ("publisher", "authors", "undecided"))
    with pytest.raises(Exception, match="read as it is, not saved again"):
        model.save("/nonexistent")


def write_license_gru_standin(record, models):
    """GROBID's ``license_gru`` folder as the recording made it: GROBID's ``config.json`` and the
    Keras 2 HDF5 DeLFT 0.4.6 wrote (its groups and attributes, each weight's values drawn again
    by the recording script's ``weight_values``)."""
    import h5py

    recorder = load_module(LICENSE_GRU_RECORDER)
    folder = models / "license_gru"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(record["config"]))
    with h5py.File(folder / "model_weights.hdf5", "w") as file:
        for group in record["groups"]:
            target = file if group["name"] == "/" else file.require_group(group["name"])
            for key, attribute in group["attrs"].items():
                target.attrs[key] = (attribute["value"] if attribute["kind"] == "string" else
                                     np.array(attribute["value"], dtype=h5py.string_dtype()))
        for dataset in record["datasets"]:
            file.create_dataset(dataset["name"],
                                data=recorder.weight_values(dataset["k"], dataset["shape"]))


def test_grobids_license_gru_gives_delft_046s_probabilities(standin_registry, tmp_path):
    """GROBID's other shipped classifier: 10 classes, its weights not held here, so a stand-in
    with its config.json and seeded weights, saved and run by DeLFT 0.4.6
    (data/classification/record_delft046_license_gru.py)."""
    from delft.textClassification import Classifier

    record = json.loads(gzip.decompress(LICENSE_GRU_RECORD.read_bytes()))
    write_license_gru_standin(record, tmp_path)
    model = Classifier("license_gru")
    model.load(dir_path=str(tmp_path))
    assert model.config.list_classes == record["config"]["list_classes"]
    result = model.predict(record["texts"], "json", use_main_thread_only=True)
    assert_delft046_probabilities(result, record["result"]["classifications"],
                                  record["config"]["list_classes"])


def test_delft1_classifier_folders_are_refused_in_one_line(tmp_path):
    from delft.textClassification import Classifier

    folder = tmp_path / "copyright_gru"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architecture": "gru",
                                                    "list_classes": CLASSES}))
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="a DeLFT 1.x .PyTorch. classifier"):
        Classifier("copyright_gru").load(str(tmp_path))


def test_library_writes_nothing_on_stdout(capsys):
    trained(max_epoch=1)
    assert capsys.readouterr().out == ""


def test_cli_messages_are_tensorflow_free(tmp_path):
    """A sanity check of the CLI's stderr: only delft's lines."""
    csv = tmp_path / "data.csv"
    texts, labels = data()
    csv.write_text("".join(f'"{t}",{label},CC-BY\n' for t, label in zip(texts, labels)))
    done = run_python([REPO_ROOT / "delft" / "applications" / "licenseClassifier.py", "train",
                       "--task", "copyright", "--input", csv, "--output", tmp_path / "models",
                       "--max-epoch", "1", "--maxlen", "24", "--seed", "1"], cwd=tmp_path,
                      timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = delft_stderr_lines(done.stderr)
    assert lines[0].startswith("216 train texts, 24 validation texts"), lines
    assert (tmp_path / "models" / "copyright_gru" / "model.weights.h5").is_file()
