"""A small labelled text set for the classifier tests: texts of three classes, each with words
of its class among common ones."""
import numpy as np

CLASSES = ["publisher", "authors", "undecided"]


def data():
    """Texts and classes with words of their class, varied enough for a vocabulary."""
    rng = np.random.default_rng(0)
    words = {"publisher": "Elsevier Springer Wiley publisher press".split(),
             "authors": "author authors owners creators themselves".split(),
             "undecided": "unknown unclear maybe other none".split()}
    filler = "the of and copyright rights reserved licence article journal".split()
    texts, labels = [], []
    for i in range(240):
        label = CLASSES[i % 3]
        chosen = list(rng.choice(words[label], 3)) + list(rng.choice(filler, 6))
        rng.shuffle(chosen)
        texts.append(" ".join(chosen))
        labels.append(label)
    return texts, labels


def built_without_dropout(model, texts, strategy):
    """``model`` (an untrained ``Classifier``) built on ``texts`` under ``strategy``, its initial
    weights seeded as ``Classifier.train`` seeds them (built outside ``train``, unseeded, each
    run drew other weights), every dropout rate 0 (bert's head and encoder take the checkpoint's
    rates): steps compared must be deterministic."""
    import keras

    keras.utils.set_random_seed(model.training_config.seed)
    model._new_preprocessor(texts)
    model.model = model._build(strategy, model.p, model._transformer_dir)
    for layer in model.model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
    model.models = [model.model]
    model._strategy = strategy
    return model
