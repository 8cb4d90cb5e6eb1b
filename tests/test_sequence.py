"""The ``Sequence`` API end to end: train, eval, tag (pairs, JSON, TEI), tag_file, n-fold, incremental.

Uses the session model of conftest.py (trained once); the few trainings here run 1-2 epochs on a
small slice of the date data.
"""
import datetime
import json
import math
import xml.etree.ElementTree as ElementTree
from collections import Counter

import numpy as np
import pytest

from conftest import loaded_sequence, MODEL_NAME, crf_sequences, token_accuracy, unlabelled_matrix
from delft.sequenceLabelling import Sequence, evaluation
from delft.sequenceLabelling.tagger import get_entities_with_offsets
from delft.utilities.Tokenizer import tokenizeAndFilterSimple, tokenize_with_offsets
from delft.utilities.errors import ConfigurationError

TEI_NS = "{http://www.tei-c.org/ns/1.0}"
DATE_TYPES = {"<day>", "<month>", "<year>"}


def labels_of(pairs_per_sequence):
    return [[label for _, label in pairs] for pairs in pairs_per_sequence]


def raw_texts(trained_date, n=30):
    """Raw strings made of evaluation sequences, plus a few with irregular spacing."""
    texts = [" ".join(tokens) for tokens in trained_date.x_eval[:n]]
    texts += ["Received:  March 3,1999; accepted 12/04/2000.", "  (June 2005)  "]
    return texts


# -- eval -------------------------------------------------------------------------------------
def test_eval_matches_seqeval_on_real_predictions(trained_date):
    from seqeval.metrics import classification_report, f1_score

    model = trained_date.model
    y_true = [list(labels) for labels in trained_date.y_eval]
    scores = model.eval(trained_date.x_eval, trained_date.y_eval)
    y_pred = labels_of(model.tag(trained_date.x_eval, None))
    assert 0.5 < scores["micro"]["f1"] <= 1.0  # real predictions, not a degenerate model
    reference = classification_report(y_true, y_pred, output_dict=True, zero_division=0)
    types = set(scores["labels"])
    assert types == set(reference) - {"micro avg", "macro avg", "weighted avg"}
    assert types == DATE_TYPES
    for name, block in scores["labels"].items():
        expected = reference[name]
        assert block["precision"] == pytest.approx(float(expected["precision"]), abs=1e-12)
        assert block["recall"] == pytest.approx(float(expected["recall"]), abs=1e-12)
        assert block["f1"] == pytest.approx(float(expected["f1-score"]), abs=1e-12)
        assert block["support"] == int(expected["support"])
    assert scores["micro"]["f1"] == pytest.approx(f1_score(y_true, y_pred), abs=1e-12)
    assert scores["micro"]["precision"] == pytest.approx(
        float(reference["micro avg"]["precision"]), abs=1e-12)
    assert scores["micro"]["recall"] == pytest.approx(float(reference["micro avg"]["recall"]),
                                                      abs=1e-12)
    assert scores["micro"]["support"] == int(reference["micro avg"]["support"])


def test_validation_eval_and_tag_share_one_traced_step(trained_date):
    """The predictor validation used during training serves eval and tag: traced once."""
    from delft.sequenceLabelling import Sequence

    model = Sequence("date-small", max_epoch=1, batch_size=20, word_lstm_units=8,
                     char_lstm_units=8, char_emb_size=8, seed=1)
    x, y = trained_date.x_train[:40], trained_date.y_train[:40]
    model.train(x, y, x_valid=trained_date.x_valid[:10], y_valid=trained_date.y_valid[:10])
    [predictor] = model._predictors.values()  # validation's
    assert predictor._step.experimental_get_tracing_count() == 1
    model.eval(trained_date.x_eval, trained_date.y_eval)
    model.tag(trained_date.x_eval[:3], None)
    assert list(model._predictors.values()) == [predictor]
    assert predictor._step.experimental_get_tracing_count() == 1


def test_eval_logs_report_and_prints_nothing(trained_date, capsys, caplog):
    import logging

    with caplog.at_level(logging.DEBUG, logger="delft"):
        scores = trained_date.model.eval(trained_date.x_eval[:20], trained_date.y_eval[:20])
    assert capsys.readouterr().out == ""  # the library never writes to stdout
    logged = caplog.text
    assert f"F1 {scores['micro']['f1']:.4f}" in logged
    assert "all (micro avg.)" in logged
    for name in DATE_TYPES:
        assert name in logged


# -- tag: JSON, TEI ---------------------------------------------------------------------------
def test_tag_raw_strings_json_structure(loaded_date, trained_date):
    texts = raw_texts(trained_date)
    result = loaded_date.tag(texts, "json")
    assert set(result) == {"software", "date", "model", "texts", "runtime"}
    assert result["software"] == "DeLFT"
    assert result["model"] == MODEL_NAME
    datetime.datetime.fromisoformat(result["date"])
    assert isinstance(result["runtime"], (int, float)) and result["runtime"] >= 0
    json.loads(json.dumps(result))  # serialisable as it is
    assert len(result["texts"]) == len(texts)
    found = 0
    pairs = loaded_date.tag(texts, None)
    for text, item, tagged in zip(texts, result["texts"], pairs):
        assert set(item) == {"text", "entities"}
        assert item["text"] == text
        position = 0
        for entity in item["entities"]:
            assert set(entity) == {"text", "class", "score", "beginOffset", "endOffset"}
            begin, last = entity["beginOffset"], entity["endOffset"]  # DeLFT's: last included
            assert position <= begin <= last < len(text)
            assert text[begin:last + 1] == entity["text"]
            assert entity["class"] in DATE_TYPES
            assert 0.0 <= entity["score"] <= 1.0
            position = last + 1
            found += 1
        # the entities are those of the token labels, at the tokens' offsets
        tokens, offsets = tokenize_with_offsets(text)
        assert [t for t, _ in tagged] == tokens
        expected = [(kind, offsets[a][0], offsets[b - 1][1] - 1) for kind, a, b, _, _ in
                    get_entities_with_offsets([label for _, label in tagged], offsets)]
        assert [(e["class"], e["beginOffset"], e["endOffset"]) for e in item["entities"]] == expected
    assert found >= len(texts)  # date strings: at least one entity per text on average


def test_tag_tokens_json_joins_with_spaces(loaded_date, trained_date):
    sequences = [list(x) for x in trained_date.x_eval[:5]]
    result = loaded_date.tag(sequences, "json")
    for tokens, item in zip(sequences, result["texts"]):
        assert item["text"] == " ".join(tokens)
        for entity in item["entities"]:
            assert item["text"][entity["beginOffset"]:entity["endOffset"] + 1] == entity["text"]


def test_tag_tei_parses_as_xml(loaded_date, trained_date):
    texts = raw_texts(trained_date, 10) + ["Tom & Jerry <b> 3 March 1999 \"quoted\""]
    document = loaded_date.tag(texts, "TEI")
    root = ElementTree.fromstring(document.encode("utf-8"))
    assert root.tag == TEI_NS + "TEI"
    paragraphs = root.findall(f"./{TEI_NS}text/{TEI_NS}body/{TEI_NS}p")
    assert len(paragraphs) == len(texts)
    entities = loaded_date.tag(texts, "json")["texts"]
    for text, paragraph, item in zip(texts, paragraphs, entities):
        assert "".join(paragraph.itertext()) == text  # the text is kept whole, markup added
        rs = paragraph.findall(f"{TEI_NS}rs")
        # GROBID's TEI names a type without its brackets: <month> is type="month"
        assert [(r.get("type"), r.text) for r in rs] == [(e["class"].strip("<>"), e["text"])
                                                         for e in item["entities"]]


# -- tag: lengths, characters, edge cases ------------------------------------------------------
def test_long_sequence_is_not_truncated(trained_date):
    model = trained_date.load()
    model.model_config.max_sequence_length = 50
    base = [t for seq in trained_date.x_eval for t in seq]
    tokens = (base * (700 // len(base) + 1))[:700]
    result = model.tag([tokens, tokens[:60]], None)
    assert len(result[0]) == 700
    assert [t for t, _ in result[0]] == tokens
    assert len(result[1]) == 60
    labels = {label for _, label in result[0]}
    assert labels <= set(model.p.label_vocabulary.labels)
    # a date far past position 50 is still labelled as a date
    assert any(label != "O" for _, label in result[0][600:])


def test_unseen_characters_tag_without_error(loaded_date):
    texts = ["2021年3月5日", "😀 March 😀 1999 🎉", "Ωμέγα 12 مارس २०२०", "\u00e9t\u0301e 1999 ℃"]
    known = set(loaded_date.p.char_index)
    assert any(c not in known for text in texts for c in text)
    result = loaded_date.tag(texts, None)
    for text, pairs in zip(texts, result):
        assert [t for t, _ in pairs] == tokenizeAndFilterSimple(text)
        assert all(label in loaded_date.p.label_vocabulary.labels for _, label in pairs)
    tokens = [["年", "😀"], ["ꙮ"]]
    assert [len(p) for p in loaded_date.tag(tokens, None)] == [2, 1]
    assert len(loaded_date.tag(texts, "json")["texts"]) == len(texts)


def test_empty_inputs(loaded_date):
    assert loaded_date.tag([], None) == []
    assert loaded_date.tag([], "json")["texts"] == []
    # texts without any token: nothing to label, and nothing crashes — even a batch of only those
    result = loaded_date.tag([""] * 25 + ["   ", "March 2005"], None)
    assert result[:26] == [[]] * 26
    assert [t for t, _ in result[26]] == ["March", "2005"]
    assert loaded_date.tag([[]], None) == [[]]
    items = loaded_date.tag(["", "\u200b"], "json")["texts"]
    assert [item["entities"] for item in items] == [[], []]


def test_order_is_kept(loaded_date, trained_date):
    rng = np.random.default_rng(5)
    pool = [list(x) for x in trained_date.x_eval + trained_date.x_valid]
    sequences = [pool[i] for i in rng.permutation(len(pool))[:40]]
    assert len({len(s) for s in sequences}) > 3  # lengths vary, so batching reorders them
    together = loaded_date.tag(sequences, None, batch_size=7)
    one_by_one = [loaded_date.tag([s], None)[0] for s in sequences]
    assert together == one_by_one
    assert [[t for t, _ in pairs] for pairs in together] == sequences


# -- tag_file -----------------------------------------------------------------------------------
@pytest.fixture
def text_file(tmp_path, trained_date):
    lines = raw_texts(trained_date, 12)
    content = []
    for i, line in enumerate(lines):
        content.append(line)
        if i % 4 == 1:
            content.append("")       # blank lines are skipped
        if i % 5 == 2:
            content.append("   \t")  # so are whitespace-only ones
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(content) + "\n", encoding="utf-8")
    return path, lines


def test_tag_file_json_streams_valid_json(loaded_date, text_file, tmp_path, monkeypatch):
    from delft.sequenceLabelling import wrapper

    monkeypatch.setattr(wrapper, "TAG_FILE_CHUNK", 5)  # several chunks: the joins are exercised
    path, lines = text_file
    out = tmp_path / "out.json"
    loaded_date.tag_file(str(path), "json", str(out))
    result = json.loads(out.read_text(encoding="utf-8"))
    assert {"software", "date", "model", "texts", "runtime"} <= set(result)
    assert result["model"] == MODEL_NAME
    assert [item["text"] for item in result["texts"]] == lines
    expected = loaded_date.tag(lines, "json")["texts"]
    for got, want in zip(result["texts"], expected):
        assert [(e["class"], e["beginOffset"], e["endOffset"], e["text"]) for e in got["entities"]] \
            == [(e["class"], e["beginOffset"], e["endOffset"], e["text"]) for e in want["entities"]]
        assert [e["score"] for e in got["entities"]] == pytest.approx(
            [e["score"] for e in want["entities"]], abs=2e-4)


def test_tag_file_iob(loaded_date, text_file, tmp_path):
    path, lines = text_file
    out = tmp_path / "out.iob"
    loaded_date.tag_file(str(path), "iob", str(out))
    blocks = out.read_text(encoding="utf-8").strip("\n").split("\n\n")
    assert len(blocks) == len(lines)
    expected = loaded_date.tag(lines, None)
    for block, line, pairs in zip(blocks, lines, expected):
        rows = [row.split("\t") for row in block.split("\n")]
        assert [r[0] for r in rows] == tokenizeAndFilterSimple(line)
        assert rows == [list(p) for p in pairs]


def test_tag_file_crf_matrix(loaded_date, trained_date, tmp_path):
    sequences = crf_sequences(trained_date.corpus_path, limit=25)
    path = tmp_path / "matrix.crf"
    path.write_text(unlabelled_matrix(sequences), encoding="utf-8")
    out = tmp_path / "out.json"
    loaded_date.tag_file(str(path), "json", str(out), input_format="crf")
    result = json.loads(out.read_text(encoding="utf-8"))
    assert [item["text"] for item in result["texts"]] == [
        " ".join(line.split()[0] for line in seq) for seq in sequences]
    out_iob = tmp_path / "out.iob"
    loaded_date.tag_file(str(path), "iob", str(out_iob), input_format="crf")
    blocks = out_iob.read_text(encoding="utf-8").strip("\n").split("\n\n")
    assert [[row.split("\t")[0] for row in block.split("\n")] for block in blocks] == [
        [line.split()[0] for line in seq] for seq in sequences]


# -- training -----------------------------------------------------------------------------------
def small(trained_date, n_train=60, n_valid=20):
    return (trained_date.x_train[:n_train], trained_date.y_train[:n_train],
            trained_date.x_valid[:n_valid], trained_date.y_valid[:n_valid])


def seeded_small(trained_date, seed):
    """A 2-epoch model trained on :func:`small` with ``seed``."""
    x, y, xv, yv = small(trained_date)
    model = Sequence("date-seeded", max_epoch=2, batch_size=20, recurrent_dropout=0.0,
                     seed=seed, early_stop=False)
    model.train(x, y, x_valid=xv, y_valid=yv)
    return model


def assert_same_training(first, second):
    """The same losses and validation F1 at each epoch, the same weights at the end."""
    assert [(r["loss"], r["val_f1"]) for r in first.history] == \
        [(r["loss"], r["val_f1"]) for r in second.history]
    weights_a, weights_b = first.model.get_weights(), second.model.get_weights()
    assert len(weights_a) == len(weights_b) > 0
    for a, b in zip(weights_a, weights_b):
        np.testing.assert_array_equal(a, b)


def test_seeded_training_is_repeatable(trained_date):
    assert_same_training(seeded_small(trained_date, 7), seeded_small(trained_date, 7))


def test_validation_step_is_prepared_beside_the_first_train_step_and_changes_nothing(
        trained_date, monkeypatch):
    """Once the train step is traced, the validation step is traced and run once in a thread of
    its own (the train step's first call optimizes its graph meanwhile): traced once in all, and
    the epochs and weights are those of a training that does not prepare it; its failure is the
    training's."""
    import threading

    from delft.sequenceLabelling import trainer

    prepare = trainer.Trainer.prepare_validation
    calls = []

    def recorded(self, validation):
        calls.append((threading.current_thread() is threading.main_thread(),
                      self._train_step.experimental_get_tracing_count()))
        prepare(self, validation)

    monkeypatch.setattr(trainer.Trainer, "prepare_validation", recorded)
    prepared = seeded_small(trained_date, 3)
    assert calls == [(False, 1)]  # aside, the train step traced already
    [predictor] = prepared._predictors.values()
    assert predictor._step.experimental_get_tracing_count() == 1
    monkeypatch.setattr(trainer.Trainer, "prepare_validation", lambda self, validation: None)
    assert_same_training(prepared, seeded_small(trained_date, 3))

    def failing(self, validation):
        raise RuntimeError("the validation step could not be prepared")

    monkeypatch.setattr(trainer.Trainer, "prepare_validation", failing)
    with pytest.raises(RuntimeError, match="could not be prepared"):
        seeded_small(trained_date, 3)


def test_validation_is_prepared_aside_on_one_replica_only(monkeypatch):
    """On several replicas two steps' collectives in flight at once could wait on each other:
    the validation is not prepared there, nor without validation; the training curve's plotting
    library is imported aside in every case."""
    from types import SimpleNamespace

    from delft.training import loop
    from delft.training.loop import EpochTrainer

    imported = []
    monkeypatch.setattr(loop, "importlib", SimpleNamespace(import_module=imported.append))
    prepared = []
    for replicas, validation, expected in ((1, "data", ["data"]), (2, "data", []),
                                           (1, None, [])):
        trainer = SimpleNamespace(
            strategy=SimpleNamespace(num_replicas_in_sync=replicas),
            _train_step=SimpleNamespace(trace=lambda: None),
            prepare_validation=prepared.append)
        EpochTrainer._prepare_aside(trainer, validation).result(timeout=60)
        assert prepared == expected
        assert imported == [loop.CURVE_LIBRARY]
        prepared.clear()
        imported.clear()


def test_pool_batches_reaches_the_training_batches_from_the_cli_and_sequence(trained_date,
                                                                           monkeypatch):
    """``--pool-batches`` is a config field: parsed by the CLI, taken by ``Sequence``, and the
    pools the trainer cuts its batches from (the epoch's step count included). A value other than
    the default (1), so that a field dropped on the way fails."""
    from delft.applications import flow, grobidTagger
    from delft.sequenceLabelling import batching, trainer

    assert batching.POOL_BATCHES != 5
    settings = flow.resolve(grobidTagger.APPLICATION, ["date", "train", "--pool-batches", "5"]).settings
    assert settings["pool_batches"] == 5
    pools, counted = [], []

    def recording(lengths, batch_size, rng=None, pool_batches=None):
        pools.append(pool_batches)
        return batching.length_bucketed_batches(lengths, batch_size, rng, pool_batches)

    def counting(num_rows, batch_size, pool_batches=None):
        counted.append(pool_batches)
        return batching.batches_per_epoch(num_rows, batch_size, pool_batches)

    monkeypatch.setattr(trainer, "length_bucketed_batches", recording)
    monkeypatch.setattr(trainer, "batches_per_epoch", counting)
    x, y, xv, yv = small(trained_date)
    model = Sequence("date-pool", max_epoch=2, batch_size=20, recurrent_dropout=0.0, seed=7,
                     early_stop=False, pool_batches=5)
    model.train(x, y, x_valid=xv, y_valid=yv)
    assert model.training_config.pool_batches == 5 and pools == [5, 5] and counted == [5]


def test_length_groups_train_the_same_model_and_reach_the_trainer_from_the_cli(trained_date,
                                                                             monkeypatch):
    """``--length-groups`` is a config field that reaches the training slices; padding each
    batch in groups of similar length changes the float summation order, not the model."""
    from delft.applications import flow, grobidTagger
    from delft.sequenceLabelling import batching

    assert batching.LENGTH_GROUPS != 3
    settings = flow.resolve(grobidTagger.APPLICATION, ["date", "train", "--length-groups", "3"]).settings
    assert settings["length_groups"] == 3
    slice_counts = Counter()
    original = batching.ReplicaFeeder.slices

    def recording(self, corpus, rows, label_ids=None):
        parts = original(self, corpus, rows, label_ids)
        if label_ids is not None:
            slice_counts[len(parts)] += 1
        return parts

    monkeypatch.setattr(batching.ReplicaFeeder, "slices", recording)
    x, y, xv, yv = small(trained_date)
    weights = {}
    for groups in (1, 3):
        slice_counts.clear()
        model = Sequence("date-groups", max_epoch=2, batch_size=20, dropout=0.0,
                         recurrent_dropout=0.0, seed=7, early_stop=False, length_groups=groups)
        model.train(x, y, x_valid=xv, y_valid=yv)
        assert slice_counts == Counter({groups: 6})  # 60 rows, batch 20, 2 epochs
        weights[groups] = model.model.get_weights()
    moved = [np.linalg.norm(a - b) for a, b in zip(weights[1], weights[3])]
    assert max(moved) > 0  # three groups do sum in another order
    for a, b in zip(weights[1], weights[3]):
        assert np.linalg.norm(a - b) <= 1e-4 * max(np.linalg.norm(b), 1.0)


def test_history_best_val_f1_is_the_restored_model(trained_date):
    model = trained_date.model
    best = max(record["val_f1"] for record in model.history)
    predicted = labels_of(model.tag(trained_date.x_valid, None))
    recomputed = evaluation.f1_score([list(y) for y in trained_date.y_valid], predicted)
    assert recomputed == pytest.approx(best, abs=1e-12)


def test_early_stopping_restores_the_best_epoch(trained_date, monkeypatch):
    """Validation F1 forced to drop after epoch 1: training stops and keeps epoch 1's weights."""
    from delft.sequenceLabelling import trainer

    x, y, xv, yv = small(trained_date)
    model = Sequence("date-early", max_epoch=6, batch_size=20, recurrent_dropout=0.0, seed=2,
                     patience=2, early_stop=True)
    real_f1 = trainer.evaluation.f1_score
    seen = []

    def fake_f1(y_true, y_pred):
        seen.append([w.copy() for w in model.model.get_weights()])  # this epoch's weights
        value = real_f1(y_true, y_pred)
        return value if len(seen) == 1 else value - 1.0  # every later epoch looks worse

    monkeypatch.setattr(trainer.evaluation, "f1_score", fake_f1)
    model.train(x, y, x_valid=xv, y_valid=yv)
    monkeypatch.undo()
    assert len(model.history) == 3  # epoch 1 best, then `patience` epochs without progress
    assert len(seen) == 3
    final = model.model.get_weights()
    for restored, best in zip(final, seen[0]):
        np.testing.assert_array_equal(restored, best)
    assert any(not np.array_equal(a, b) for a, b in zip(final, seen[-1]))


def test_a_tie_with_the_best_epoch_keeps_the_later_weights_and_training_going(trained_date,
                                                                               monkeypatch):
    """Validation F1 equal every epoch (a saturated small validation set): no epoch is worse, so
    training runs all epochs and keeps the last one's weights, not the first's."""
    from delft.sequenceLabelling import trainer

    x, y, xv, yv = small(trained_date)
    model = Sequence("date-tie", max_epoch=4, batch_size=20, recurrent_dropout=0.0, seed=2,
                     patience=2, early_stop=True)
    seen = []

    def constant_f1(y_true, y_pred):
        seen.append([w.copy() for w in model.model.get_weights()])
        return 0.9

    monkeypatch.setattr(trainer.evaluation, "f1_score", constant_f1)
    model.train(x, y, x_valid=xv, y_valid=yv)
    monkeypatch.undo()
    assert len(model.history) == 4  # more than 1 + patience epochs: ties are not "no progress"
    for restored, last in zip(model.model.get_weights(), seen[-1]):
        np.testing.assert_array_equal(restored, last)
    assert any(not np.array_equal(a, b) for a, b in zip(seen[-1], seen[0]))


def test_nfold_validates_every_sequence_once(trained_date, monkeypatch, tmp_path):
    x, y = trained_date.x_train[:61], trained_date.y_train[:61]  # 61: not a multiple of 3
    model = Sequence("date-nfold", max_epoch=1, batch_size=30, recurrent_dropout=0.0, seed=1,
                     fold_number=3)
    calls = []
    original = model.train

    def recording_train(x_train, y_train, f_train=None, x_valid=None, y_valid=None, *a, **k):
        calls.append(([tuple(s) for s in x_train], [tuple(s) for s in x_valid],
                      [tuple(s) for s in y_valid]))
        return original(x_train, y_train, f_train, x_valid, y_valid, *a, **k)

    monkeypatch.setattr(model, "train", recording_train)
    model.train_nfold(x, y)
    everything = Counter(tuple(s) for s in x)
    assert len(calls) == 3
    validated = Counter()
    for kept, held_out, held_labels in calls:
        assert len(kept) + len(held_out) == len(x)
        assert Counter(kept) + Counter(held_out) == everything
        assert sorted(map(len, held_labels)) == sorted(map(len, held_out))
        validated += Counter(held_out)
    assert validated == everything  # every sequence validated exactly once, none dropped
    assert sorted(len(c[1]) for c in calls) == [20, 20, 21]
    assert len(model.models) == 3
    assert len({id(m) for m, _ in model.models}) == 3
    with pytest.raises(ConfigurationError, match="3 fold models and none chosen: eval"):
        model.save(str(tmp_path))  # no fold chosen yet: nothing written
    assert list(tmp_path.iterdir()) == []
    scores = model.eval(trained_date.x_eval, trained_date.y_eval)
    assert len(scores["folds"]) == 3
    f1s = [fold["micro"]["f1"] for fold in scores["folds"]]
    assert all(0.0 <= f <= 1.0 for f in f1s)
    assert scores["micro_f1_mean"] == pytest.approx(float(np.mean(f1s)))
    assert scores["best_fold"] == int(np.argmax(f1s))
    tagged = model.tag(trained_date.x_eval[:3], None)
    assert [len(p) for p in tagged] == [len(s) for s in trained_date.x_eval[:3]]
    model.save(str(tmp_path))  # the best fold
    reloaded = Sequence("date-nfold")
    reloaded.load(str(tmp_path))
    assert reloaded.tag(trained_date.x_eval[:3], None) == tagged


def test_incremental_training_grows_the_model(trained_date, tmp_path):
    model = Sequence(MODEL_NAME, max_epoch=1, batch_size=20, recurrent_dropout=0.0, seed=3)
    model.load(str(trained_date.models_dir))
    old_labels = list(model.p.label_vocabulary.labels)
    old_chars = dict(model.p.char_index)
    new_chars = ["ǂ", "ʬ", "ꙮ"]
    assert not set(new_chars) & set(old_chars)
    x = [list(s) for s in trained_date.x_train[:40]]
    y = [list(s) for s in trained_date.y_train[:40]]
    x += [["Summer", "ǂ2020"], ["ʬꙮ", "Winter", "1999"], ["Spring", "2001"]]
    y += [["B-<season>", "B-<year>"], ["O", "B-<season>", "B-<year>"], ["B-<season>", "I-<season>"]]
    model.train(x, y, incremental=True)
    assert model.p.num_labels == len(old_labels) + 2
    assert model.p.label_vocabulary.labels[:len(old_labels)] == old_labels
    assert model.p.char_vocab_size == len(old_chars) + 3
    assert all(model.p.char_index[c] == i for c, i in old_chars.items())
    result = model.tag(trained_date.x_eval, None)
    assert token_accuracy(result, trained_date.y_eval) > 0.8  # still tags the old labels
    assert {"B-<day>", "B-<month>", "B-<year>"} <= {l for pairs in result for _, l in pairs}
    assert [t for t, _ in model.tag([["ꙮ", "ǂ", "2020"]], None)[0]] == ["ꙮ", "ǂ", "2020"]
    # the grown model is consistent on disk too
    model.save(str(tmp_path))
    again = loaded_sequence(MODEL_NAME, str(tmp_path))
    assert again.p.num_labels == model.p.num_labels
    assert again.tag(trained_date.x_eval[:10], None) == model.tag(trained_date.x_eval[:10], None)


def test_positional_train_and_softmax_bidlstm(trained_date):
    """GROBID calls train(x_train, y_train, x_valid, y_valid) positionally (here with BidLSTM,
    and GROBID's recurrent_dropout=0.5, which runs Keras' generic, non-fused LSTM)."""
    x, y, xv, yv = small(trained_date)
    model = Sequence("date-BidLSTM", architecture="BidLSTM", max_epoch=2, batch_size=20,
                     recurrent_dropout=0.5, seed=1)
    model.train(x, y, xv, yv)
    assert len(model.history) == 2
    assert all("val_f1" in record for record in model.history)  # the 3rd argument validated
    assert all(math.isfinite(record["loss"]) for record in model.history)
    result = model.tag(trained_date.x_eval[:10], None)
    assert [[t for t, _ in p] for p in result] == [list(s) for s in trained_date.x_eval[:10]]
    assert {l for p in result for _, l in p} <= set(model.p.label_vocabulary.labels)
    scores = model.eval(trained_date.x_eval[:10], trained_date.y_eval[:10])
    assert 0.0 <= scores["micro"]["f1"] <= 1.0
    # a batch of texts without tokens never reaches that LSTM (a zero-step loop TF cannot run)
    assert model.tag([[]], None) == [[]]
    assert model.tag(["", " ", "June 2005"], None)[:2] == [[], []]


def test_features_architecture_trains_and_tags(trained_date, tmp_path):
    from delft.sequenceLabelling.reader import load_data_crf_string

    n, m = 60, 20
    model = Sequence("date-BidLSTM_CRF_FEATURES", architecture="BidLSTM_CRF_FEATURES",
                     max_epoch=2, batch_size=20, recurrent_dropout=0.0, seed=1)
    model.train(trained_date.x_train[:n], trained_date.y_train[:n], trained_date.f_train[:n],
                trained_date.x_valid[:m], trained_date.y_valid[:m], trained_date.f_valid[:m])
    assert model.p.features_indices and model.p.feature_index
    assert all("val_f1" in record for record in model.history)
    x_eval, f_eval = trained_date.x_eval[:10], trained_date.f_eval[:10]
    result = model.tag(x_eval, None, features=f_eval)
    assert [[t for t, _ in p] for p in result] == [list(s) for s in x_eval]
    with pytest.raises(ValueError, match="features"):
        model.tag(x_eval, None)
    # GROBID's path for a features model: load, read the matrix, tag with features=f_all
    model.save(str(tmp_path))
    loaded = Sequence("date-BidLSTM_CRF_FEATURES")
    loaded.load(str(tmp_path))
    sequences = crf_sequences(trained_date.corpus_path, limit=15)
    x_all, f_all = load_data_crf_string(unlabelled_matrix(sequences))
    assert loaded.tag(x_all, None, features=f_all) == model.tag(x_all, None, features=f_all)
