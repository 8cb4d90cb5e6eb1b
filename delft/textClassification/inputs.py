"""What ``Classifier`` accepts as texts and classes, checked before any work: one sentence naming
the argument and the element, never an error deep in TensorFlow.

>>> checked_texts(np.array(["a text", "another"], dtype=object), "texts")
['a text', 'another']
>>> one_hot_rows(["b", "a"], ["a", "b"], 2, "training").tolist()
[[0.0, 1.0], [1.0, 0.0]]
"""
import numpy as np


def checked_texts(texts, what):
    """``texts`` (a list, tuple or numpy array of str, as DeLFT's scripts pass) as a list."""
    if isinstance(texts, str) or not isinstance(texts, (list, tuple, np.ndarray)):
        raise TypeError(f"{what} must be a list of texts, not {_kind(texts)}"
                        + (": to classify one text, pass [text]" if isinstance(texts, str)
                           else ""))
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{what}[{i}] must be a text (a str), not {_kind(text)}")
    return texts


def one_hot_rows(labels, classes, count, what):
    """``labels`` as one-hot float32 rows [count, len(classes)]: given as one-hot rows (DeLFT's
    scripts) or as class names."""
    if labels is None:
        raise ValueError(f"{what} data has texts but no classes")
    if len(labels) != count:
        raise ValueError(f"{what} data has {count} texts and {len(labels)} classes")
    if count and all(isinstance(label, str) for label in labels):
        index = {name: i for i, name in enumerate(classes)}
        unknown = sorted({label for label in labels if label not in index})
        if unknown:
            raise ValueError(f"{what} data: class {unknown[0]!r} is not one of the model's "
                             f"classes ({', '.join(classes)})")
        rows = np.zeros((count, len(classes)), dtype=np.float32)
        rows[np.arange(count), [index[label] for label in labels]] = 1.0
        return rows
    try:
        rows = np.asarray(labels, dtype=np.float32)
    except (TypeError, ValueError):
        raise ValueError(f"{what} classes must be one-hot rows or class names") from None
    if rows.shape != (count, len(classes)):
        raise ValueError(f"{what} classes must be {count} rows of {len(classes)} values (one per "
                         f"class of {', '.join(classes)}), not of shape {rows.shape}")
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise ValueError(f"{what} classes must be finite values >= 0")
    return rows


def _kind(value):
    return "None" if value is None else f"a {type(value).__name__}"
