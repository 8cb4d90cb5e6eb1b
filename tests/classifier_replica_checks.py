"""1-device vs 2-replica checks of the classifier, run in a subprocess with DELFT_CPU_REPLICAS=2
by test_classifier.py.

Each check prints one JSON line ``{"check": name, ...numbers...}``; the test asserts on them, so the
2 logical CPU devices never leak into the rest of the test session.
"""
import functools
import json
import os
import sys
import tempfile

assert os.environ.get("DELFT_CPU_REPLICAS") == "2", "run with DELFT_CPU_REPLICAS=2"

import numpy as np  # noqa: E402

import delft  # noqa: E402,F401  (configures the logical devices before TF starts)
from delft.textClassification import Classifier  # noqa: E402
from delft.textClassification.trainer import ClassifierTrainer  # noqa: E402
from delft.utilities import devices  # noqa: E402
from classifier_data import CLASSES, built_without_dropout, data  # noqa: E402
from multi_replica_checks import relative_difference, variable_type  # noqa: E402
from tiny_transformers import write_tiny_checkpoint  # noqa: E402

MAXLEN = {"dpcnn": 95}  # its poolings and convolutions need 95 positions


@functools.lru_cache(maxsize=None)
def tiny_bert():
    """A 2-layer random BERT checkpoint (tiny_transformers), written once per process."""
    return write_tiny_checkpoint("bert", os.path.join(tempfile.mkdtemp(), "tiny-bert"))


def step_settings(architecture):
    """One epoch of the one batch; bert at a rate that shows in one step."""
    if architecture == "bert":
        return dict(max_epoch=1, learning_rate=1e-3, transformer_name=tiny_bert())
    return dict(max_epoch=1)


def classifier(texts, strategy, architecture):
    """An untrained model, seeded, without dropout (:func:`built_without_dropout`)."""
    model = Classifier("copyright_" + architecture, architecture=architecture,
                       list_classes=CLASSES, dropout=0.0, maxlen=MAXLEN.get(architecture, 24),
                       batch_size=64, early_stop=False, seed=3, **step_settings(architecture))
    return built_without_dropout(model, texts, strategy)


def one_step(architecture):
    """The same first step (64 texts, one global batch) on 1 device and on 2 replicas, and on 1
    device with the batch's rows in reverse order: the same step in another float32 summation
    order, the floor any 1-vs-2 difference is measured against."""
    texts, labels = data()
    texts, labels = texts[:64], labels[:64]
    one_hot = np.eye(3, dtype=np.float32)[[CLASSES.index(label) for label in labels]]
    weights = {}
    for run, multi_gpu, order in (("one", False, slice(None)), ("two", True, slice(None)),
                                  ("one_reversed", False, slice(None, None, -1))):
        strategy = devices.get_strategy(multi_gpu)
        model = classifier(texts, strategy, architecture)
        if run == "one":
            start = model.model.get_weights()
        else:
            model.model.set_weights(start)
        if run == "two":
            assert strategy.num_replicas_in_sync == 2
            mirrored = variable_type(model.model)
        trainer = ClassifierTrainer(model.model, model.p, model.training_config, strategy, 64,
                                    architecture, model.architecture.uses_transformer)
        history = trainer.train(model.p.encode(texts[order]), model.p.label_rows(one_hot[order]))
        weights[run] = (model.model.get_weights(), history[-1]["loss"])
    return dict(difference=relative_difference(weights["two"][0], weights["one"][0]),
                reordering_floor=relative_difference(weights["one_reversed"][0],
                                                     weights["one"][0]),
                moved=relative_difference(weights["one"][0], start),
                loss_1=weights["one"][1], loss_2=weights["two"][1], variable=mirrored)


def sharded_prediction():
    """A trained model's probabilities of 1,001 texts (batch 64: a ragged last batch) on 1 device
    and on 2 replicas, in input order."""
    texts, labels = data()
    model = Classifier("copyright_gru", list_classes=CLASSES, maxlen=24, batch_size=64,
                       max_epoch=2, seed=5)
    model.train(texts, labels)
    many = [texts[i % len(texts)] + (" extra" * (i % 4)) for i in range(1001)]
    one = model.predict(many, "array")
    two = model.predict(many, "array", multi_gpu=True)
    document = model.predict(many[:3], "json", multi_gpu=True)
    return dict(difference=float(np.max(np.abs(one - two))), rows=len(two),
                same_classes=int(np.sum(one.argmax(1) == two.argmax(1))),
                texts_in_order=[c["text"] for c in document["classifications"]] == many[:3])


if __name__ == "__main__":
    for name in sys.argv[1:]:
        if name.startswith("one_step:"):
            print(json.dumps(dict(check=name, **one_step(name.split(":")[1]))), flush=True)
        elif name == "sharded_prediction":
            print(json.dumps(dict(check=name, **sharded_prediction())), flush=True)
