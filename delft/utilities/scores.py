"""Precision, recall and F1 from counts, their averages, and the table they are printed as: shared
by the tagger's entity scores (:mod:`delft.sequenceLabelling.evaluation`) and the classifier's
class scores (:mod:`delft.textClassification.evaluation`).

>>> print(format_report(Report(labels={"a": scores_from_counts(1, 2, 1)},
...                            micro=scores_from_counts(1, 2, 1),
...                            macro=dict(scores_from_counts(1, 2, 1))), digits=2))
                  precision    recall  f1-score   support
<BLANKLINE>
               a       0.50      1.00      0.67         1
<BLANKLINE>
all (micro avg.)       0.50      1.00      0.67         1
all (macro avg.)       0.50      1.00      0.67         1
<BLANKLINE>
"""

MICRO_HEADING = "all (micro avg.)"
MACRO_HEADING = "all (macro avg.)"


def ratio(numerator, denominator):
    """``numerator / denominator``, 0 where undefined (no prediction, no true item)."""
    return numerator / denominator if denominator else 0.0


def harmonic_f1(precision, recall):
    total = precision + recall
    return 2.0 * precision * recall / total if total else 0.0


def scores_from_counts(tp, n_pred, n_true):
    """Precision, recall, F1 and the counts, of ``tp`` correct among ``n_pred`` predicted and
    ``n_true`` true items.

    >>> scores_from_counts(1, 2, 4)["f1"]
    0.3333333333333333
    """
    precision = ratio(tp, n_pred)
    recall = ratio(tp, n_true)
    return {"precision": precision, "recall": recall, "f1": harmonic_f1(precision, recall),
            "support": n_true, "tp": tp, "fp": n_pred - tp, "fn": n_true - tp}


def average(blocks, weights):
    """Precision, recall and F1 of ``blocks`` averaged with ``weights``."""
    total = sum(weights)
    averaged = {}
    for key in ("precision", "recall", "f1"):
        values = [block[key] for block in blocks]
        averaged[key] = ratio(sum(v * w for v, w in zip(values, weights)), total)
    return averaged


class Report(dict):
    """Scores (a dict: ``labels`` name -> scores, ``micro``, ``macro``...), printed as the
    per-label table of :func:`format_report`; ``label_order``: the rows' order (default: sorted
    by name)."""

    label_order = None

    def __str__(self):
        return format_report(self)


def format_report(scores, digits=4):
    """The text table of ``scores`` (a :class:`Report`, or a dict of its keys): one row per label
    (sorted by name, or in the report's ``label_order``), then the micro and macro averages."""
    labels = scores["labels"]
    width = max([len(MICRO_HEADING)] + [len(name) for name in labels])
    header = "{:>{width}s} " + " {:>9}" * 4
    row = "{:>{width}s} " + " {:>9.{digits}f}" * 3 + " {:>9}"
    lines = [header.format("", "precision", "recall", "f1-score", "support", width=width), ""]
    for name in getattr(scores, "label_order", None) or sorted(labels):
        block = labels[name]
        lines.append(row.format(name, block["precision"], block["recall"], block["f1"],
                                block["support"], width=width, digits=digits))
    lines.append("")
    for heading, key in ((MICRO_HEADING, "micro"), (MACRO_HEADING, "macro")):
        block = scores[key]
        lines.append(row.format(heading, block["precision"], block["recall"], block["f1"],
                                block["support"], width=width, digits=digits))
    return "\n".join(lines) + "\n"


