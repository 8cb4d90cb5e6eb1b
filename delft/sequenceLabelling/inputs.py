"""What ``Sequence`` is given, checked before any work: one readable sentence when it is wrong.

``tag`` takes a list of raw texts or a list of token lists (GROBID passes numpy object arrays of
lists); a bare string, None, a number or a mix of texts and token lists is a ``TypeError``.
Training and evaluation data must align: as many label sequences as token sequences, as many
labels as tokens in each, else a ``ValueError`` naming the first sequence that differs. Data whose
labels are all one label trains to an entity F1 of 0: that is a logged warning.
"""
import logging
from collections.abc import Sequence as SequenceABC
from itertools import chain

import numpy as np

logger = logging.getLogger(__name__)

OUTSIDE = "O"


def _kind(value):
    return type(value).__name__


def _described(value):
    """``None``, ``a str``, ``an int``..."""
    if value is None:
        return "None"
    name = _kind(value)
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _is_sequence(value):
    return isinstance(value, (SequenceABC, np.ndarray)) and not isinstance(value, (str, bytes))


def check_texts(texts, argument="texts"):
    """True when ``texts`` are raw strings, False when token lists; else a ``TypeError``.

    >>> check_texts(["12 June 2005"]), check_texts([["12", "June"]]), check_texts([])
    (True, False, False)
    >>> check_texts("12 June 2005")
    Traceback (most recent call last):
    ...
    TypeError: texts must be a list of texts or of token lists, not a str: to tag one text, pass [text]
    >>> check_texts(["12 June", ["2005"]])
    Traceback (most recent call last):
    ...
    TypeError: texts must be all raw strings or all token lists: texts[0] is a str, texts[1] a list
    """
    if isinstance(texts, str):
        raise TypeError(f"{argument} must be a list of texts or of token lists, not a str: "
                        f"to tag one text, pass [text]")
    if not _is_sequence(texts):
        raise TypeError(f"{argument} must be a list of texts or of token lists, not "
                        f"{_described(texts)}")
    if len(texts) == 0:
        return False
    raw = isinstance(texts[0], str)
    if _all_well_typed(texts, raw):
        return raw
    for index, item in enumerate(texts):
        if isinstance(item, str) != raw or not (raw or _is_sequence(item)):
            if raw or isinstance(item, str):
                raise TypeError(f"{argument} must be all raw strings or all token lists: "
                                f"{argument}[0] is {_described(texts[0])}, {argument}[{index}] "
                                f"{_described(item)}")
            raise TypeError(f"{argument}[{index}] must be a token list (or a raw string), not "
                            f"{_described(item)}")
        if not raw:
            _check_tokens(item, f"{argument}[{index}]")
    return raw


def _only_strings(values):
    """Every value a str, judged by the set of their types (one C-level pass)."""
    return all(issubclass(kind, str) for kind in set(map(type, values)))


def _all_well_typed(texts, raw):
    """``texts`` all raw strings (``raw``) or all token lists, judged by the sets of their types
    and of their tokens' types, as tag takes them in bulk; the item by item checks, slower,
    name the first wrong one."""
    if raw:
        return _only_strings(texts)
    return all(issubclass(kind, (SequenceABC, np.ndarray)) and not issubclass(kind, (str, bytes))
               for kind in set(map(type, texts))) and _only_strings(chain.from_iterable(texts))


def _check_tokens(tokens, where):
    if _only_strings(tokens):
        return
    for position, token in enumerate(tokens):
        if not isinstance(token, str):
            raise TypeError(f"{where}[{position}] must be a token (a str), not {_described(token)}")


def looks_like_tokens(value):
    """Token sequences (lists of str), as opposed to feature sequences (lists of lists of str).

    >>> looks_like_tokens([["12", "June"]]), looks_like_tokens([[["12", "NOCAPS"]]])
    (True, False)
    """
    try:
        return value is not None and len(value) > 0 and isinstance(value[0][0], str)
    except (TypeError, IndexError):
        return False


def check_features(features, token_sequences, argument="features"):
    """``features`` given with token sequences: one feature row per token, else a ``ValueError``."""
    if features is None:
        return
    if not _is_sequence(features):
        raise TypeError(f"{argument} must be a list (one per sequence), not {_described(features)}")
    if len(features) != len(token_sequences):
        raise ValueError(f"{argument} has {len(features)} sequences for {len(token_sequences)} "
                         "token sequences")
    for index, (rows, tokens) in enumerate(zip(features, token_sequences)):
        if len(rows) != len(tokens):
            raise ValueError(f"{argument}[{index}] has {len(rows)} feature rows for "
                             f"{len(tokens)} tokens")


def check_labelled(x, y, features=None, what="training"):
    """Token and label sequences that align (same counts, same lengths), and their features when
    given; else a ``ValueError`` (a ``TypeError`` for what is not a list of sequences).

    >>> check_labelled([["12", "June"]], [["B-<day>"]])
    Traceback (most recent call last):
    ...
    ValueError: training sequence 0 has 2 tokens but 1 labels
    """
    for argument, value in (("tokens", x), ("labels", y)):
        if not _is_sequence(value):
            raise TypeError(f"{what} {argument} must be a list of sequences, not "
                            f"{_described(value)}")
    if len(x) != len(y):
        raise ValueError(f"{what} data has {len(x)} token sequences but {len(y)} label sequences")
    if what == "training" and not any(len(labels) for labels in y):
        raise ValueError("training data has no labelled token: nothing to learn from "
                         f"({len(y)} sequences)")
    for index, (tokens, labels) in enumerate(zip(x, y)):
        if not _is_sequence(tokens) or not _is_sequence(labels):
            raise TypeError(f"{what} sequence {index} must be token and label lists, not "
                            f"{_described(tokens)} and {_described(labels)}")
        if len(tokens) != len(labels):
            raise ValueError(f"{what} sequence {index} has {len(tokens)} tokens but "
                             f"{len(labels)} labels")
        _check_tokens(tokens, f"{what} sequence {index}, token")
        _check_tokens(labels, f"{what} sequence {index}, label")
    check_features(features, x, f"{what} features")


def warn_if_one_label(y, what="training"):
    """Log a warning when every label of ``y`` is the same (all ``O``: nothing to learn).

    Returns that label, or None.
    """
    labels = {label for sequence in y for label in sequence}
    if len(labels) != 1:
        return None
    label = labels.pop()
    if label == OUTSIDE:
        logger.warning("every label of the %s data is 'O': there is no entity to learn and the "
                       "entity F1 will be 0", what)
    else:
        logger.warning("every label of the %s data is %r: the model can only learn to predict it",
                       what, label)
    return label
