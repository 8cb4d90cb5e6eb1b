"""Categorical feature columns (GROBID's layout features): which columns a model reads, and the
error for input with another count of columns than training.

Columns are counted from the first one after the token (DeLFT's indices). Without
``features_indices`` every column with at most ``features_vocabulary_size`` distinct training
values is used (DeLFT's rule; on GROBID's name-header, name-citation, affiliation-address and date
data it keeps the same layout columns as the limit of 32 this package used before:
``benchmarks/features.py`` prints them); the lexical columns (lowercase token, prefixes, suffixes)
have hundreds of values.
"""
import logging

from delft.sequenceLabelling.reader import token_line_number
from delft.utilities.errors import ConfigurationError, DataFormatError, DelftError

logger = logging.getLogger(__name__)

# DeLFT's default: a column with more distinct values is lexical (token, prefixes...), not layout
DEFAULT_FEATURES_VOCABULARY_SIZE = 12


class FeatureColumnsError(DelftError, ValueError):
    """Tokens whose feature column count is not the one the model was trained on.

    ``sequence`` and ``token`` locate the first such token in the input given; :meth:`in_file`
    turns the error into a :class:`DataFormatError` naming the line of the file it was read from.
    """

    def __init__(self, sequence, token, found, expected):
        self.sequence, self.token, self.found, self.expected = sequence, token, found, expected
        super().__init__(f"features of sequence {sequence}, token {token}: {self.reason}")

    @property
    def reason(self):
        return (f"{self.found} feature columns, but the model was trained on {self.expected} "
                "(a GROBID feature matrix from another GROBID version or model?)")

    def in_file(self, path, first_sequence=0):
        """The same error at its line of ``path``, whose sequences from ``first_sequence`` on
        were the input (a chunk of a large file)."""
        line = token_line_number(path, first_sequence + self.sequence, self.token)
        return DataFormatError(path, line, self.reason)


def distinct_values(features, width):
    """The set of values of each of the first ``width`` feature columns."""
    distinct = [set() for _ in range(width)]
    for seq in features:
        for values, column in zip(distinct, zip(*seq)):
            values.update(column)
    return distinct


def select_columns(distinct, features_indices, limit):
    """The feature columns to use, given the sets of values of the training columns.

    Args:
        distinct: per column of the training rows, the set of its values.
        features_indices: the columns asked for, or None for DeLFT's automatic rule: every
            column with at most ``limit`` distinct values.
        limit: ``features_vocabulary_size``.

    Returns:
        The columns, in increasing order.

    Raises:
        ConfigurationError: a column asked for is past the rows, or has more than ``limit`` values.

    >>> select_columns([{"a", "b"}, set("abcdefghijklmn"), {"x"}], None, 12)
    [0, 2]
    """
    width = len(distinct)
    too_many = [c for c in range(width) if len(distinct[c]) > limit]
    if features_indices is None:
        chosen = [c for c in range(width) if c not in too_many]
        logger.info("feature columns: using %s; left out %s, which have more than %d distinct "
                    "values (features_vocabulary_size)", chosen, too_many, limit)
        return chosen
    chosen = sorted(set(features_indices))
    if chosen and chosen[-1] >= width:
        raise ConfigurationError(
            f"features_indices asks for column {chosen[-1]}, but the training rows have "
            f"{width} feature columns (0-{width - 1}, counted from the one after the token)")
    over = [c for c in chosen if c in too_many]
    if over:
        raise ConfigurationError(
            "features_indices asks for columns with more distinct values than "
            f"features_vocabulary_size ({limit}): " +
            ", ".join(f"column {c} has {len(distinct[c])}" for c in over) +
            "; raise features_vocabulary_size or leave these columns out")
    return chosen
