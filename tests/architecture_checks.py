"""Every RNN architecture through train, eval, save, load and tag; and one device against 2 replicas.

Imported by test_architectures for the one-device runs; run as a script with DELFT_CPU_REPLICAS=2
for the 2-replica ones (each prints one JSON line per architecture, which the test reads), so that
the logical devices, which must exist before TensorFlow starts, stay out of the test session:

    DELFT_CPU_REPLICAS=2 python tests/architecture_checks.py MODELS_DIR [EMBEDDINGS_NAME]
"""
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import delft  # noqa: E402,F401  (configures the logical devices before TF starts)
from delft.sequenceLabelling import Sequence  # noqa: E402
from delft.sequenceLabelling.config import TrainingConfig  # noqa: E402
from delft.sequenceLabelling.models import ARCHITECTURES, new_preprocessor  # noqa: E402
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file  # noqa: E402

RNN_ARCHITECTURES = sorted(name for name, parts in ARCHITECTURES.items() if parts.family == "rnn")
SAMPLE = REPO / "data" / "sequenceLabelling" / "grobid" / "date" / "date-sample.train"
# small models: what is checked is that each architecture runs end to end, not its score
SMALL = dict(char_emb_size=6, char_lstm_units=5, word_lstm_units=8, batch_size=20,
             recurrent_dropout=0.0, seed=1)


def sample_sets(name):
    """Train (60), validation (20) and test (20) ``(x, y, f)`` sets of the date sample; f is
    None for an architecture without features."""
    x, y, f = (list(part) for part in load_data_and_labels_crf_file(SAMPLE))
    if not ARCHITECTURES[name].features:
        f = [None] * len(x)

    def part(start, end):
        features = None if f[0] is None else f[start:end]
        return x[start:end], y[start:end], features

    return part(0, 60), part(60, 80), part(80, 100)


def model_parts(model):
    """What the built model is made of, to check it is the architecture asked for."""
    return {"char_encoder": type(model.char_encoder).__name__,
            "casing": model.casing_embedding is not None,
            "features": model.feature_encoder is not None,
            "word_encoder": type(getattr(model, "word_gru", None) or model.word_lstm).__name__,
            "crf": model.use_crf}


def round_trip(name, directory, multi_gpu=False, embeddings_name=None):
    """Train ``name`` for 2 epochs, evaluate, save, load and tag; the facts to check."""
    train, valid, test = sample_sets(name)
    model = Sequence(f"date-{name}", architecture=name, embeddings_name=embeddings_name,
                     max_epoch=2, **SMALL)
    model.train(*train, *valid, multi_gpu=multi_gpu)
    scores = model.eval(*test, multi_gpu=multi_gpu)
    model.save(str(directory))
    loaded = Sequence(f"date-{name}")
    loaded.load(str(directory), multi_gpu=multi_gpu)
    x_test, _, f_test = test
    tagged = model.tag(x_test, None, features=f_test, multi_gpu=multi_gpu)
    variable = loaded.model.trainable_variables[0]
    return {"architecture": name, "epochs": len(model.history),
            "loss_finite": all(np.isfinite(r["loss"]) for r in model.history),
            "f1": scores["micro"]["f1"], "support": scores["micro"]["support"],
            "same_tags_after_load": loaded.tag(x_test, None, features=f_test,
                                               multi_gpu=multi_gpu) == tagged,
            "tokens_kept": [[t for t, _ in pairs] for pairs in tagged] == x_test,
            "word_embedding_size": loaded.model_config.word_embedding_size,
            "variable_type": type(getattr(variable, "value", variable)).__name__,
            "parts": model_parts(loaded.model)}


def same_steps(name, embeddings_name=None, steps=3):
    """The weights after ``steps`` training steps on one device and on 2 replicas, from the same
    initial weights and batches (no dropout): their largest relative difference."""
    from delft.sequenceLabelling.trainer import Trainer
    from delft.utilities import devices

    (x, y, f), _, _ = sample_sets(name)
    weights, initial = {}, None
    for replicas, strategy in ((1, devices.get_strategy(False)), (2, devices.get_strategy(True))):
        assert strategy.num_replicas_in_sync == replicas
        sequence = Sequence(f"date-{name}", architecture=name, embeddings_name=embeddings_name,
                            dropout=0.0, **SMALL)
        sequence.p = new_preprocessor(sequence.model_config)
        sequence.p.fit(x, y, f)
        sequence._open_embeddings()
        sequence.model = sequence._build(strategy, sequence.p)
        if initial is None:
            initial = sequence.model.get_weights()
        sequence.model.set_weights(initial)
        config = TrainingConfig(max_epoch=1, seed=7, early_stop=False)
        rows = len(x) // steps
        Trainer(sequence.model, sequence.p, config, strategy, rows).train(
            sequence.p.encode(x, f), sequence.p.encode_labels(y))
        weights[replicas] = sequence.model.get_weights()
    moved = max(float(np.abs(a - b).max()) for a, b in zip(weights[1], initial))
    difference = max(float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12))
                     for a, b in zip(weights[2], weights[1]))
    return {"moved": moved, "relative_difference": difference}


if __name__ == "__main__":
    assert os.environ.get("DELFT_CPU_REPLICAS") == "2", "run with DELFT_CPU_REPLICAS=2"
    models_dir = Path(sys.argv[1])
    embeddings = sys.argv[2] if len(sys.argv) > 2 else None
    for architecture in RNN_ARCHITECTURES:
        record = round_trip(architecture, models_dir / architecture, multi_gpu=True,
                            embeddings_name=embeddings)
        record["steps"] = same_steps(architecture, embeddings)
        print(json.dumps(record), flush=True)
