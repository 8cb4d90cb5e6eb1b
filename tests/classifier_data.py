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
