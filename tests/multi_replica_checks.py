"""1-device vs 2-replica checks, run in a subprocess with DELFT_CPU_REPLICAS=2 by test_multi_replica.

Each check prints one JSON line ``{"check": name, ...numbers...}``; the test asserts on them, so the
2 logical CPU devices never leak into the rest of the test session.
"""
import json
import os
import sys

assert os.environ.get("DELFT_CPU_REPLICAS") == "2", "run with DELFT_CPU_REPLICAS=2"

import keras  # noqa: E402
import numpy as np  # noqa: E402

import delft  # noqa: E402,F401  (configures the logical devices before TF starts)
from delft.sequenceLabelling import Sequence, evaluation  # noqa: E402
from delft.sequenceLabelling.config import TrainingConfig  # noqa: E402
from delft.sequenceLabelling.models import new_preprocessor  # noqa: E402
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file  # noqa: E402
from delft.sequenceLabelling.tagger import Predictor  # noqa: E402
from delft.sequenceLabelling.trainer import Trainer  # noqa: E402
from delft.utilities import devices  # noqa: E402
from delft.utilities.data_path import shared_data_file  # noqa: E402
from conftest import loaded_sequence  # noqa: E402


def emit(name, **values):
    print(json.dumps(dict(check=name, **values)), flush=True)


def relative_difference(a, b):
    """Largest per-tensor ||a - b|| / ||b|| (tensors that are all zero compare absolutely)."""
    return max(float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1.0 if not y.any() else 1e-12))
               for x, y in zip(a, b))


def global_relative_change(a, b):
    return float(np.sqrt(sum(np.sum((x - y) ** 2) for x, y in zip(a, b)))
                 / np.sqrt(sum(np.sum(y ** 2) for y in b)))


def variable_type(model):
    """The TF class behind a Keras variable: MirroredVariable under MirroredStrategy."""
    variable = model.trainable_variables[0]
    return type(getattr(variable, "value", variable)).__name__


def date_data():
    x, y, f = load_data_and_labels_crf_file(
        str(shared_data_file("sequenceLabelling", "grobid", "date", "date-220311.train")))
    return list(x), list(y)


def untrained_sequence(x, y, strategy, **kwargs):
    """An untrained date-BidLSTM_CRF, its initial weights seeded (built outside ``train``, which
    seeds them: unseeded, each run drew other weights and another 1-vs-2 difference)."""
    keras.utils.set_random_seed(7)
    sequence = Sequence("date-BidLSTM_CRF", dropout=0.0, recurrent_dropout=0.0, **kwargs)
    sequence.p = new_preprocessor(sequence.model_config)
    sequence.p.fit(x, y)
    sequence.model = sequence._build(strategy, sequence.p)
    sequence._strategy = strategy
    return sequence


def check_training_steps(x, y):
    """Same initial weights, same global batches: 1 and 10 steps on 1 device vs 2 replicas, and
    on 1 device with the rows reversed (the same steps in another float32 summation order: the
    floor a 1-vs-2 difference is measured against)."""
    single, mirrored = devices.get_strategy(False), devices.get_strategy(True)
    assert mirrored.num_replicas_in_sync == 2
    rows = 61  # odd: replicas get 31 and 30 rows of the last batch
    x, y = x[:rows], y[:rows]
    for steps in (1, 10):
        reference = untrained_sequence(x, y, single)
        initial = reference.model.get_weights()
        runs = {}
        for name, strategy, order in (("one", single, slice(None)), ("two", mirrored, slice(None)),
                                      ("one_reversed", single, slice(None, None, -1))):
            sequence = untrained_sequence(x, y, strategy)
            sequence.model.set_weights(initial)
            config = TrainingConfig(max_epoch=steps, seed=7, early_stop=False,
                                    clip_gradients=5.0)
            trainer = Trainer(sequence.model, sequence.p, config, strategy, rows)
            corpus = sequence.p.encode(x[order])
            history = trainer.train(corpus, sequence.p.encode_labels(y[order]))
            runs[name] = (sequence.model.get_weights(), [h["loss"] for h in history],
                          variable_type(sequence.model))
        emit("training_steps", steps=steps,
             weights_relative_difference=relative_difference(runs["two"][0], runs["one"][0]),
             reordering_floor=relative_difference(runs["one_reversed"][0], runs["one"][0]),
             loss_one=runs["one"][1], loss_two=runs["two"][1],
             moved=global_relative_change(runs["one"][0], initial),
             variable_type_two=runs["two"][2])


def check_validation_58_of_60(x, y):
    """58 validation sequences, global batch 60, 2 replicas: same F1 and counts as one device."""
    single, mirrored = devices.get_strategy(False), devices.get_strategy(True)
    trained = untrained_sequence(x[:300], y[:300], single)
    config = TrainingConfig(max_epoch=3, seed=1, early_stop=False)
    Trainer(trained.model, trained.p, config, single, 60).train(
        trained.p.encode(x[:300]), trained.p.encode_labels(y[:300]))
    weights = trained.model.get_weights()
    for size in (58, 57):  # 57: an odd set, the replicas get 29 and 28
        valid_x, valid_y = x[300:300 + size], y[300:300 + size]
        scores = {}
        for name, strategy in (("one", single), ("two", mirrored)):
            sequence = untrained_sequence(x[:300], y[:300], strategy)
            sequence.model.set_weights(weights)
            predictions = Predictor(sequence.model, sequence.p, strategy).predict(
                sequence.p.encode(valid_x), 60)
            predicted = predictions.labels(sequence.p)
            result = evaluation.precision_recall_f1(valid_y, predicted)
            scores[name] = {"f1": result["micro"]["f1"],
                            "counts": {k: [v["tp"], v["fp"], v["fn"]]
                                       for k, v in result["labels"].items()},
                            "n_predicted": sum(len(p) for p in predicted)}
        emit("validation_58", size=size, one=scores["one"], two=scores["two"],
             n_tokens=sum(len(s) for s in valid_y))


def check_sharded_tagging(x, y):
    """5,000 real date sequences (the corpus repeated, shuffled), batch 1024: identical labels."""
    single = devices.get_strategy(False)
    sequence = untrained_sequence(x, y, single)
    Trainer(sequence.model, sequence.p, TrainingConfig(max_epoch=2, seed=1),
            single, 60).train(sequence.p.encode(x), sequence.p.encode_labels(y))
    rng = np.random.default_rng(0)
    texts = [x[i] for i in rng.integers(0, len(x), 5000)]
    one = sequence.tag(texts, None, batch_size=1024)
    two = sequence.tag(texts, None, batch_size=1024, multi_gpu=True)
    mirrored_type = variable_type(sequence.model)
    emit("sharded_tagging", sequences=len(texts), identical=one == two,
         tokens_one=sum(len(s) for s in one), tokens_two=sum(len(s) for s in two),
         tokens_in=sum(len(s) for s in texts),
         order_kept=all([t for t, _ in pairs] == list(text) for pairs, text in zip(two, texts)),
         variable_type=mirrored_type)


def check_loaded_model_is_mirrored(x, y, directory):
    """A model loaded with multi_gpu=True is built and loaded inside the mirrored scope."""
    single = devices.get_strategy(False)
    sequence = untrained_sequence(x[:100], y[:100], single)
    sequence.save(directory)
    loaded = loaded_sequence("date-BidLSTM_CRF", directory, multi_gpu=True)
    same = all(np.array_equal(a, b) for a, b in zip(loaded.model.get_weights(),
                                                    sequence.model.get_weights()))
    emit("loaded_mirrored", variable_type=variable_type(loaded.model), same_weights=same,
         tags_equal=loaded.tag(x[:50], None, multi_gpu=True) == sequence.tag(x[:50], None))


if __name__ == "__main__":
    data_x, data_y = date_data()
    checks = sys.argv[1].split(",")
    if "training_steps" in checks:
        check_training_steps(data_x, data_y)
    if "validation_58" in checks:
        check_validation_58_of_60(data_x, data_y)
    if "sharded_tagging" in checks:
        check_sharded_tagging(data_x, data_y)
    if "loaded_mirrored" in checks:
        check_loaded_model_is_mirrored(data_x, data_y, sys.argv[2])
