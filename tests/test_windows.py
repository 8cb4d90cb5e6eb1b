"""Windows: every position kept exactly once, from the window where it has most context; row
predictions stitched back; subtoken windows of whole words."""
import numpy as np
import pytest

from delft.sequenceLabelling.output import per_text
from delft.sequenceLabelling.preprocess import EncodedCorpus
from delft.sequenceLabelling.windows import (Stitcher, rows_from_windows, subtoken_windows,
                                             windows)

# -- windows --------------------------------------------------------------------------------------
CASES = [(length, size, stride) for length in range(0, 61) for size in range(1, 21)
         for stride in [None] + list(range(1, size + 3))]


def check_windows(length, size, stride):
    spans = windows(length, size, stride)
    kept = np.zeros(length, dtype=int)
    for start, end, keep_from, keep_to in spans:
        assert 0 <= start <= end <= length
        assert end - start <= size
        assert 0 <= keep_from <= keep_to <= end - start
        kept[start + keep_from:start + keep_to] += 1
    assert kept.tolist() == [1] * length, (length, size, stride, spans)
    return spans


def test_windows_keep_every_position_exactly_once():
    for case in CASES:
        check_windows(*case)


def test_windows_without_stride_do_not_overlap():
    for length in range(1, 80):
        for size in range(1, 25):
            spans = check_windows(length, size, None)
            assert [s for s, *_ in spans] == list(range(0, length, size))
            assert all(keep_from == 0 and keep_to == end - start
                       for start, end, keep_from, keep_to in spans)


def test_windows_keep_each_position_where_it_has_most_context():
    for length in range(1, 61):
        for size in range(2, 21):
            for stride in range(1, size):
                spans = check_windows(length, size, stride)
                for position in range(length):
                    margins = [min(position - s, e - 1 - position)
                               for s, e, _, _ in spans if s <= position < e]
                    chosen = [(s, e) for s, e, a, b in spans if s + a <= position < s + b][0]
                    assert min(position - chosen[0], chosen[1] - 1 - position) == max(margins)


def test_windows_property_random(rng):
    for _ in range(300):
        size = int(rng.integers(1, 400))
        stride = [None, int(rng.integers(1, size + 1))][int(rng.integers(0, 2))]
        check_windows(int(rng.integers(0, 3000)), size, stride)


# -- merging row predictions ------------------------------------------------------------------------
def stitched(corpus, row_values):
    """Every row's kept values written into one flat array, cut per sequence."""
    stitcher = Stitcher(corpus)
    flat = np.full(stitcher.size, -1, np.int64)
    # one batch of every row, padded, in reverse order, and a slot with no row (index -1)
    batch = np.full((len(row_values) + 1, max(map(len, row_values), default=0)), -2, np.int64)
    for row, values in enumerate(row_values):
        batch[len(row_values) - 1 - row, :len(values)] = values
    kept, positions = stitcher.positions(np.arange(len(row_values) - 1, -2, -1), batch.shape[1])
    flat[positions] = batch[kept]
    return per_text(flat, stitcher.starts.tolist())


def positions_per_row(corpus):
    """What a model 'predicts' for a row: the absolute position of each of its tokens."""
    return [corpus.row_offset[r] + np.arange(corpus.row_length[r])
            for r in range(corpus.num_rows)]


@pytest.mark.parametrize("size, stride", [(None, None), (1, None), (3, None), (4, 2), (5, 1),
                                          (7, 3), (50, None)])
def test_stitching_row_predictions_restores_every_position(size, stride):
    lengths = np.array([0, 1, 2, 7, 13, 50, 101])
    rows = rows_from_windows(lengths, size, stride)
    corpus = EncodedCorpus(lengths, *rows)
    if size:
        assert corpus.row_length.max() <= size
    merged = stitched(corpus, positions_per_row(corpus))
    assert [m.tolist() for m in merged] == [list(range(n)) for n in lengths]




# -- subtoken windows -------------------------------------------------------------------------------------
def test_subtoken_windows_cover_every_word_once():
    rng = np.random.default_rng(3)
    for _ in range(200):
        budget = int(rng.integers(1, 12))
        counts = rng.integers(1, budget + 1, size=int(rng.integers(1, 60)))
        stride = None if rng.random() < 0.5 else int(rng.integers(1, 2 * budget))
        kept = np.zeros(len(counts), dtype=int)
        seen = np.zeros(len(counts), dtype=int)
        for start, end, keep_from, keep_to in subtoken_windows(counts, budget, stride):
            assert end > start and counts[start:end].sum() <= budget
            assert 0 <= keep_from <= keep_to <= end - start
            kept[start + keep_from:start + keep_to] += 1
            seen[start:end] += 1
        assert (kept == 1).all() and (seen >= 1).all()
