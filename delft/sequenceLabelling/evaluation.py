"""Entity-level metrics for sequence labelling (precision, recall, F1 per entity type).

Plain functions over plain lists of string labels, in the style of ``seqeval`` / scikit-learn, and
numerically identical to ``seqeval``'s default (non-strict, conlleval-compatible) mode:

* an entity is a maximal chunk found by :func:`get_entities` (IOB2, IOB1, IOBES-ish tags; an ``I-``
  without a preceding ``B-`` starts an entity, a type change inside an ``I-`` run starts a new one);
* a predicted entity is correct when its type, start and end all match a true entity;
* undefined ratios (no prediction, no true entity, no label at all) are ``0.0`` rather than a
  warning.

Inputs are either one flat list of labels or a list of sequences (lists or tuples) of labels; the
sequences of ``y_true`` and ``y_pred`` must have the same lengths. No TensorFlow, no numpy: this runs
every epoch on validation sets of thousands of sequences.

>>> y_true = [["B-PER", "I-PER", "O"], ["B-<date>", "O"]]
>>> y_pred = [["B-PER", "I-PER", "O"], ["O", "B-<date>"]]
>>> f1_score(y_true, y_pred)
0.5
"""

from delft.utilities.scores import Report, average, format_report, harmonic_f1, ratio, \
    scores_from_counts

__all__ = [
    "get_entities",
    "entity_counts",
    "precision_recall_f1",
    "f1_score",
    "precision_score",
    "recall_score",
    "accuracy_score",
    "format_report",
    "classification_report",
]

_OUTSIDE = "O"
_INITIAL = ("O", "")  # (tag, type) before the first label, as in seqeval
_END_AFTER = ("E", "S")
_END_BEFORE = ("B", "S", "O")
_OPEN = ("B", "I")
_START_AT = ("B", "S")
_START_AFTER = ("E", "S", "O")
_CONTINUE = ("E", "I")
_NO_TYPE = ("O", ".")

def _flatten(labels, separator):
    """One flat list of labels; nested sequences are joined, each followed by ``separator`` if given."""
    if not any(isinstance(item, (list, tuple)) for item in labels):
        return list(labels)
    flat = []
    for sequence in labels:
        if not isinstance(sequence, (list, tuple)):
            raise TypeError("labels mix sequences and single labels: {!r}".format(sequence))
        flat.extend(sequence)
        if separator is not None:
            flat.append(separator)
    return flat


def _check_lengths(y_true, y_pred):
    if len(y_true) != len(y_pred):
        raise ValueError("y_true has {} items but y_pred has {}".format(len(y_true), len(y_pred)))
    for index, (true_item, pred_item) in enumerate(zip(y_true, y_pred)):
        true_nested = isinstance(true_item, (list, tuple))
        if true_nested != isinstance(pred_item, (list, tuple)):
            raise TypeError("y_true and y_pred differ in nesting at sequence {}".format(index))
        if true_nested and len(true_item) != len(pred_item):
            raise ValueError("sequence {} has {} true labels but {} predicted labels".format(
                index, len(true_item), len(pred_item)))


def _split(label):
    """(tag, type) of a label exactly as seqeval reads it: first character, then what follows the first
    ``-`` after it (``'_'`` when empty)."""
    return label[0], label[1:].split("-", 1)[-1] or "_"


def _step(previous, label):
    """(ends, starts, previous type) for the transition from label ``previous`` (None: the start) to
    ``label``, with seqeval's ``end_of_chunk`` / ``start_of_chunk`` rules."""
    prev_tag, prev_type = _INITIAL if previous is None else _split(previous)
    tag, type_ = _split(label)
    type_changes = prev_type != type_
    ends = (prev_tag in _END_AFTER
            or (prev_tag in _OPEN and tag in _END_BEFORE)
            or (prev_tag not in _NO_TYPE and type_changes))
    starts = (tag in _START_AT
              or (prev_tag in _START_AFTER and tag in _CONTINUE)
              or (tag not in _NO_TYPE and type_changes))
    return ends, starts, prev_type


def get_entities(labels):
    """Entities ``(type, start, end)`` (``end`` inclusive) of a flat or nested list of labels.

    Same chunks, in the same order, as seqeval's default ``get_entities``: nested sequences are joined
    with an ``'O'`` after each one, and offsets index into that joined list.

    >>> get_entities(["B-PER", "I-PER", "O", "I-LOC", "B-<date>", "I-<date>"])
    [('PER', 0, 1), ('LOC', 3, 3), ('<date>', 4, 5)]
    >>> get_entities([["B-a"], ["I-a", "I-b"]])
    [('a', 0, 0), ('a', 2, 2), ('b', 3, 3)]
    """
    sequence = _flatten(labels, _OUTSIDE)
    sequence.append(_OUTSIDE)
    steps = {}
    chunks = []
    previous = None
    begin = 0
    for index, label in enumerate(sequence):
        key = (previous, label)
        step = steps.get(key)
        if step is None:
            step = steps[key] = _step(previous, label)
        ends, starts, prev_type = step
        if ends:
            chunks.append((prev_type, begin, index - 1))
        if starts:
            begin = index
        previous = label
    return chunks


def entity_counts(y_true, y_pred):
    """``{type: (tp, n_pred, n_true)}`` for every entity type in ``y_true`` or ``y_pred``, sorted by type.

    >>> entity_counts([["B-a", "I-a", "O", "B-b"]], [["B-a", "I-a", "B-b", "O"]])
    {'a': (1, 1, 1), 'b': (0, 1, 1)}
    """
    _check_lengths(y_true, y_pred)
    true_entities = get_entities(y_true)
    pred_entities = get_entities(y_pred)
    true_set = set(true_entities)
    counts = {}
    for type_, _, _ in true_entities:
        count = counts.setdefault(type_, [0, 0, 0])
        count[2] += 1
    for entity in pred_entities:
        count = counts.setdefault(entity[0], [0, 0, 0])
        count[1] += 1
        if entity in true_set:
            count[0] += 1
    return {type_: tuple(counts[type_]) for type_ in sorted(counts)}


def precision_recall_f1(y_true, y_pred):
    """Entity-level scores per type and averaged, as one dict (a :class:`Report`: printed, the
    per-label table).

    ``labels`` maps each type (sorted) to precision, recall, f1, support (number of true entities),
    tp, fp and fn; ``micro`` has the same keys over all entities; ``macro`` (unweighted mean over the
    types) and ``weighted`` (mean weighted by support) have precision, recall, f1 and support.

    >>> scores = precision_recall_f1([["B-a", "I-a", "O", "B-b"]], [["B-a", "I-a", "B-b", "O"]])
    >>> scores["labels"]["b"]
    {'precision': 0.0, 'recall': 0.0, 'f1': 0.0, 'support': 1, 'tp': 0, 'fp': 1, 'fn': 1}
    >>> scores["micro"]["f1"], scores["macro"]["f1"], scores["weighted"]["support"]
    (0.5, 0.5, 2)
    """
    counts = entity_counts(y_true, y_pred)
    labels = {type_: scores_from_counts(*count) for type_, count in counts.items()}
    blocks = list(labels.values())
    supports = [block["support"] for block in blocks]
    total_support = sum(supports)
    micro = scores_from_counts(sum(count[0] for count in counts.values()),
                    sum(count[1] for count in counts.values()),
                    total_support)
    macro = average(blocks, [1] * len(blocks))
    macro["support"] = total_support
    weighted = average(blocks, supports)
    weighted["support"] = total_support
    return Report(labels=labels, micro=micro, macro=macro, weighted=weighted)


def _micro_counts(y_true, y_pred):
    counts = entity_counts(y_true, y_pred).values()
    return (sum(count[0] for count in counts), sum(count[1] for count in counts),
            sum(count[2] for count in counts))


def precision_score(y_true, y_pred):
    """Micro-averaged entity precision: correct entities / predicted entities (0.0 if none predicted).

    >>> precision_score([["B-a", "I-a", "O", "B-b"]], [["B-a", "O", "B-b", "B-b"]])
    0.3333333333333333
    """
    tp, n_pred, _ = _micro_counts(y_true, y_pred)
    return ratio(tp, n_pred)


def recall_score(y_true, y_pred):
    """Micro-averaged entity recall: correct entities / true entities (0.0 if there is none).

    >>> recall_score([["B-a", "I-a", "O", "B-b"]], [["B-a", "O", "B-b", "B-b"]])
    0.5
    """
    tp, _, n_true = _micro_counts(y_true, y_pred)
    return ratio(tp, n_true)


def f1_score(y_true, y_pred):
    """Micro-averaged entity F1 (0.0 when precision and recall are both 0 or undefined).

    >>> f1_score([["B-a", "I-a", "O", "B-b"]], [["B-a", "O", "B-b", "B-b"]])
    0.4
    """
    tp, n_pred, n_true = _micro_counts(y_true, y_pred)
    return harmonic_f1(ratio(tp, n_pred), ratio(tp, n_true))


def accuracy_score(y_true, y_pred):
    """Token-level accuracy: fraction of labels predicted exactly (0.0 when there is no label).

    >>> accuracy_score([["B-a", "I-a", "O"], ["O"]], [["B-a", "O", "O"], ["O"]])
    0.75
    """
    _check_lengths(y_true, y_pred)
    true_labels = _flatten(y_true, None)
    pred_labels = _flatten(y_pred, None)
    correct = sum(1 for true, pred in zip(true_labels, pred_labels) if true == pred)
    return ratio(correct, len(true_labels))


def classification_report(y_true, y_pred, digits=4):
    """Text report of entity-level precision, recall, F1 and support per type, micro and macro averaged.

    Same as ``format_report(precision_recall_f1(y_true, y_pred), digits)``; call those two when the
    numbers are needed as well as the text.

    >>> y_true = [["B-<day>", "O", "B-<month>", "I-<month>"]]
    >>> y_pred = [["B-<day>", "O", "B-<month>", "O"]]
    >>> print(classification_report(y_true, y_pred, digits=2))
                      precision    recall  f1-score   support
    <BLANKLINE>
               <day>       1.00      1.00      1.00         1
             <month>       0.00      0.00      0.00         1
    <BLANKLINE>
    all (micro avg.)       0.50      0.50      0.50         2
    all (macro avg.)       0.50      0.50      0.50         2
    <BLANKLINE>
    """
    return format_report(precision_recall_f1(y_true, y_pred), digits=digits)
