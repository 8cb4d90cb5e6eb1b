"""Windows: long sequences cut into overlapping rows that fit a model, and predictions stitched back.

Nothing is ever truncated: a sequence longer than what a model takes becomes several rows, every
word is labelled from exactly one of them (the one where it has the most context on both sides),
and a :class:`Stitcher` puts the rows' labels back together, sequence by sequence.
"""
from typing import List, Optional, Sequence, Tuple

import numpy as np

Window = Tuple[int, int, int, int]


def windows(length: int, size: int, stride: Optional[int] = None) -> List[Window]:
    """Cover ``range(length)`` with windows of at most ``size`` items, every item kept exactly once.

    Args:
        length: the number of items to cover.
        size: the largest window.
        stride: distance between window starts; ``None`` (or ``>= size``) for windows that do not
            overlap.

    Returns:
        ``(start, end, keep_from, keep_to)`` per window: the window is ``[start, end)`` and its
        items ``[start + keep_from, start + keep_to)`` are the ones whose prediction is kept. With
        overlapping windows each item is kept from the window where it has the most context.

    >>> windows(5, 10)
    [(0, 5, 0, 5)]
    >>> windows(7, 3)
    [(0, 3, 0, 3), (3, 6, 0, 3), (6, 7, 0, 1)]
    >>> windows(6, 4, stride=2)
    [(0, 4, 0, 3), (2, 6, 1, 4)]
    """
    if length <= size:
        return [(0, length, 0, length)]
    if stride is None or stride >= size:
        return [(s, min(s + size, length), 0, min(size, length - s)) for s in range(0, length, size)]
    starts = list(range(0, length - size, stride)) + [length - size]
    spans = []
    for i, start in enumerate(starts):
        # keep on from where the previous window stopped, up to the middle of the next overlap
        keep_from = spans[-1][0] + spans[-1][3] - start if spans else 0
        keep_to = size if i == len(starts) - 1 else (start + size + starts[i + 1]) // 2 - start
        spans.append((start, start + size, keep_from, keep_to))
    return spans


def subtoken_windows(counts: Sequence[int], budget: int,
                     stride: Optional[int] = None) -> List[Window]:
    """Windows of whole words whose subtokens fit ``budget``, each word kept exactly once.

    Args:
        counts: the subtokens of each word (each ``<= budget``).
        budget: the subtokens a window may hold.
        stride: least distance, in subtokens, between consecutive window starts (default
            ``budget // 2``).

    Returns:
        ``(start, end, keep_from, keep_to)`` per window, in words, as :func:`windows`; a word is
        kept from the window where it sits nearer the middle of the overlap.

    >>> subtoken_windows([1, 1, 1], 5)
    [(0, 3, 0, 3)]
    >>> subtoken_windows([2, 1, 2, 1, 2, 1], 4, stride=2)
    [(0, 2, 0, 1), (1, 4, 0, 2), (3, 6, 0, 3)]
    >>> subtoken_windows([1] * 6, 4, stride=4)
    [(0, 4, 0, 4), (4, 6, 0, 2)]
    """
    counts = np.asarray(counts, dtype=np.int64)
    n = len(counts)
    cumulative = np.concatenate([[0], np.cumsum(counts)])
    if cumulative[-1] <= budget:
        return [(0, n, 0, n)]
    stride = max(1, budget // 2 if stride is None else int(stride))
    spans = []
    start = 0
    while True:
        end = int(np.searchsorted(cumulative, cumulative[start] + budget, side="right")) - 1
        end = min(max(end, start + 1), n)
        spans.append((start, end))
        if end >= n:
            break
        following = int(np.searchsorted(cumulative, cumulative[start] + stride, side="left"))
        start = min(max(following, start + 1), end)
    result = []
    keep_start = 0
    for k, (start, end) in enumerate(spans):
        keep_end = end if k == len(spans) - 1 else max((spans[k + 1][0] + end) // 2, keep_start)
        result.append((start, end, keep_start - start, keep_end - start))
        keep_start = keep_end
    return result


def rows_from_windows(sequence_lengths: Sequence[int], size: Optional[int] = None,
                      stride: Optional[int] = None) -> List[np.ndarray]:
    """Row arrays covering each sequence whole (``size=None``) or in windows of ``size``.

    Returns:
        ``[row_sequence, row_offset, row_length, keep_from, keep_to]``, one entry per row each.

    >>> [a.tolist() for a in rows_from_windows([2, 5], size=3)]
    [[0, 1, 1], [0, 0, 3], [2, 3, 2], [0, 0, 0], [2, 3, 2]]
    """
    lengths = np.array(sequence_lengths, dtype=np.int64)
    if not size or not len(lengths) or lengths.max() <= size:  # a row per sequence, whole
        return [np.arange(len(lengths), dtype=np.int64), np.zeros_like(lengths), lengths,
                np.zeros_like(lengths), lengths.copy()]
    spans = []
    for s, length in enumerate(sequence_lengths):
        for start, end, keep_from, keep_to in windows(length, size, stride):
            spans.append((s, start, end - start, keep_from, keep_to))
    return window_table(spans)


def window_table(spans: Sequence[Tuple[int, int, int, int, int]]) -> List[np.ndarray]:
    """``(sequence, offset, length, keep_from, keep_to)`` tuples as five int64 row arrays."""
    table = np.asarray(spans, dtype=np.int64).reshape(-1, 5)
    return [table[:, i] for i in range(5)]


class Stitcher:
    """Row predictions back into one flat array over every sequence, each position written once.

    Sequence ``i`` is ``flat[starts[i]:starts[i + 1]]``; a row writes only its kept positions.
    One flat array instead of an array per row or per sequence: tagging 50,000 sequences then
    holds no 100,000 small numpy objects.

    >>> from delft.sequenceLabelling.preprocess import EncodedCorpus
    >>> corpus = EncodedCorpus(np.array([5, 2]), *rows_from_windows([5, 2], size=3))
    >>> stitcher = Stitcher(corpus)
    >>> flat = np.zeros(stitcher.size, np.int32)
    >>> values = np.array([[6, 7, 0], [1, 2, 3], [4, 5, 0], [9, 9, 9]])
    >>> kept, positions = stitcher.positions(np.array([2, 0, 1, -1]), values.shape[1])
    >>> flat[positions] = values[kept]
    >>> flat.tolist(), stitcher.starts.tolist()
    ([1, 2, 3, 4, 5, 6, 7], [0, 5, 7])
    """

    def __init__(self, corpus):
        self.starts = np.concatenate([[0], np.cumsum(corpus.sequence_lengths)]).astype(np.int64)
        self._row_start = self.starts[corpus.row_sequence] + corpus.row_offset
        self._keep_from = corpus.keep_from
        self._keep_to = corpus.keep_to

    @property
    def size(self) -> int:
        """Positions over all sequences."""
        return int(self.starts[-1])

    def positions(self, rows: np.ndarray, width: int) -> Tuple[np.ndarray, np.ndarray]:
        """Where a batch's outputs go: ``(kept, positions)``, so that ``flat[positions] =
        values[kept]`` writes the kept part of ``values[k]`` (``[len(rows), width]``), the
        predictions of row ``rows[k]`` (none where ``rows[k]`` is -1); computed once for all the
        outputs of a batch."""
        columns = np.arange(width)
        kept = (rows >= 0)[:, None] & (columns >= self._keep_from[rows][:, None]) & \
            (columns < self._keep_to[rows][:, None])
        return kept, (self._row_start[rows][:, None] + columns)[kept]
