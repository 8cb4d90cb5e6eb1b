"""Scores of a classifier: per-class precision, recall and F1 of the predicted class, their
averages, accuracy, and ROC-AUC, over plain arrays.

The predicted class of a text is its most probable one (the classes are exclusive, as in every
application here; DeLFT 0.4.6's ``eval`` takes the argmax too, DeLFT 1.2.0's thresholds each class
at 0.5 as if they were not). ROC-AUC is the mean over the classes that have both positive and
negative examples of scikit-learn's ``roc_auc_score`` of the class's probability; it is what
early stopping watches, as in DeLFT.

>>> import numpy as np
>>> truth = np.array([[1, 0], [0, 1], [0, 1]])
>>> scores = class_scores(truth, np.array([[0.9, 0.1], [0.4, 0.6], [0.7, 0.3]]), ["a", "b"])
>>> scores["labels"]["b"]["recall"], scores["accuracy"], scores["roc_auc"]
(0.5, 0.6666666666666666, 1.0)
"""
import numpy as np

from delft.utilities.scores import Report, average, scores_from_counts


def mean_roc_auc(truth, probabilities):
    """The mean over classes of ROC-AUC (classes whose examples are all of one kind left out; 0.5
    when none is left).

    >>> mean_roc_auc(np.array([[1, 0], [0, 1]]), np.array([[0.8, 0.2], [0.3, 0.7]]))
    1.0
    """
    from sklearn.metrics import roc_auc_score

    truth = np.asarray(truth)
    probabilities = np.asarray(probabilities)
    values = [roc_auc_score(truth[:, c], probabilities[:, c]) for c in range(truth.shape[1])
              if 0 < truth[:, c].sum() < len(truth)]
    return float(np.mean(values)) if values else 0.5


def mean_cross_entropy(truth, probabilities, exclusive=False):
    """The loss a classifier trains on, over a whole set: the mean over texts of the binary
    cross-entropy averaged over classes (``exclusive=False``: sigmoid outputs), or of the
    categorical cross-entropy (softmax outputs), without class weights. Probabilities are clipped to
    [1e-7, 1 - 1e-7], as Keras' losses clip them.

    >>> round(mean_cross_entropy(np.array([[1, 0]]), np.array([[0.9, 0.2]])), 4)
    0.1643
    >>> round(mean_cross_entropy(np.array([[1, 0]]), np.array([[0.9, 0.1]]), exclusive=True), 4)
    0.1054
    """
    truth = np.asarray(truth, dtype=np.float64)
    probabilities = np.clip(np.asarray(probabilities, dtype=np.float64), 1e-7, 1 - 1e-7)
    if exclusive:
        losses = -np.sum(truth * np.log(probabilities), axis=1)
    else:
        losses = -np.mean(truth * np.log(probabilities)
                          + (1 - truth) * np.log(1 - probabilities), axis=1)
    return float(np.mean(losses))


def class_scores(truth, probabilities, classes):
    """Per-class and averaged scores of the predicted (most probable) class, as a
    :class:`~delft.utilities.scores.Report` (printed, the table in ``classes``' order).

    ``truth``: one-hot [texts, classes]; ``probabilities``: the classifier's [texts, classes].
    ``labels`` maps each class to precision, recall, f1, support, tp, fp, fn; ``micro`` (over all
    texts: the accuracy), ``macro`` (unweighted mean over the classes, one without example
    counting 0 as in DeLFT's reports) and ``weighted`` have precision, recall, f1 and support;
    ``accuracy`` and ``roc_auc`` are numbers.
    """
    truth = np.asarray(truth)
    probabilities = np.asarray(probabilities)
    if truth.shape != probabilities.shape or truth.ndim != 2 or len(classes) != truth.shape[1]:
        raise ValueError(f"truth {truth.shape} and probabilities {probabilities.shape} must both "
                         f"be [texts, {len(classes)} classes]")
    gold, predicted = truth.argmax(axis=1), probabilities.argmax(axis=1)
    labels = {}
    for index, name in enumerate(classes):
        labels[name] = scores_from_counts(int(np.sum((predicted == index) & (gold == index))),
                                          int(np.sum(predicted == index)),
                                          int(np.sum(gold == index)))
    blocks = list(labels.values())
    supports = [block["support"] for block in blocks]
    micro = scores_from_counts(int(np.sum(predicted == gold)), len(gold), len(gold))
    macro = dict(average(blocks, [1] * len(blocks)), support=len(gold))
    weighted = dict(average(blocks, supports), support=len(gold))
    report = Report(labels=labels, micro=micro, macro=macro, weighted=weighted,
                    accuracy=micro["precision"], roc_auc=mean_roc_auc(truth, probabilities))
    report.label_order = list(classes)
    return report
