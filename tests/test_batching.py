"""Batching: length buckets, replica slices, and the distributed dataset (1 and 2 replicas)."""
import doctest
import json
import textwrap
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from conftest import run_python
from delft.sequenceLabelling import batching
from delft.sequenceLabelling.batching import (POOL_BATCHES, distributed_dataset, dummy_batch,
                                              global_batch_size, length_bucketed_batches,
                                              replica_bounds)
from delft.sequenceLabelling.preprocess import Preprocessor


def test_doctests():
    assert doctest.testmod(batching).failed == 0


def covered(batches):
    return Counter(int(i) for batch in batches for i in batch)


@pytest.mark.parametrize("n", [0, 1, 2, 59, 60, 61, 1000, 3001])
@pytest.mark.parametrize("batch_size", [1, 7, 60])
def test_length_bucketed_batches_cover_every_row_once(n, batch_size):
    lengths = np.random.default_rng(n).integers(1, 80, n)
    for rng in (None, np.random.default_rng(3)):
        batches = length_bucketed_batches(lengths, batch_size, rng)
        assert covered(batches) == Counter(range(n))
        assert all(1 <= len(b) <= batch_size for b in batches)
        assert len(batches) == -(-n // batch_size)


def test_without_rng_batches_are_sorted_by_length():
    lengths = np.random.default_rng(0).integers(1, 100, 500)
    batches = length_bucketed_batches(lengths, 32)
    flat = np.concatenate(batches)
    assert np.all(np.diff(lengths[flat]) >= 0)


def test_with_rng_batches_are_length_sorted_within_pools_and_shuffled():
    lengths = np.random.default_rng(1).integers(1, 100, 32 * POOL_BATCHES * 2)
    batches = length_bucketed_batches(lengths, 32, np.random.default_rng(9))
    for batch in batches:
        assert np.all(np.diff(lengths[batch]) >= 0)
    # padding stays small: far less than with random batches
    waste = sum(lengths[b].max() * len(b) - lengths[b].sum() for b in batches)
    order = np.random.default_rng(2).permutation(len(lengths))
    random_waste = sum(lengths[b].max() * len(b) - lengths[b].sum()
                       for b in np.array_split(order, len(batches)))
    assert waste < random_waste / 5
    first_rows = [int(b[0]) for b in batches]
    assert first_rows != sorted(first_rows, key=lambda r: lengths[r])  # the batches are shuffled


def test_seeded_rng_gives_the_same_batches_and_epochs_differ():
    lengths = np.random.default_rng(4).integers(1, 50, 700)
    a = length_bucketed_batches(lengths, 20, np.random.default_rng(11))
    b = length_bucketed_batches(lengths, 20, np.random.default_rng(11))
    assert [x.tolist() for x in a] == [x.tolist() for x in b]
    rng = np.random.default_rng(11)
    epoch1 = length_bucketed_batches(lengths, 20, rng)
    epoch2 = length_bucketed_batches(lengths, 20, rng)
    assert [x.tolist() for x in epoch1] != [x.tolist() for x in epoch2]


def test_replica_bounds():
    for n in range(0, 70):
        for replicas in range(1, 9):
            bounds = replica_bounds(n, replicas)
            assert len(bounds) == replicas
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))  # contiguous
            sizes = [end - start for start, end in bounds]
            assert sum(sizes) == n
            assert max(sizes) - min(sizes) <= 1
            assert sizes == sorted(sizes, reverse=True)


def test_global_batch_size():
    assert global_batch_size(60, 1) == 60
    assert global_batch_size(60, 4) == 60
    assert global_batch_size(61, 4) == 64
    assert global_batch_size(1, 3) == 3


# -- the distributed dataset ------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    x = [[f"w{int(v)}" for v in rng.integers(0, 50, int(n))] for n in rng.integers(1, 12, 23)]
    y = [["B-<a>" if i % 3 == 0 else "O" for i in range(len(s))] for s in x]
    p = Preprocessor(max_char_length=5)
    p.fit(x, y)
    return p, p.encode(x), p.encode_labels(y), x


def test_default_strategy_yields_every_row_once_with_its_index(corpus):
    p, encoded, labels, x = corpus
    strategy = tf.distribute.get_strategy()
    batches = length_bucketed_batches(encoded.row_length, 5)
    seen = []
    for batch, element in zip(batches, distributed_dataset(strategy, p, encoded, lambda: batches, labels)):
        index = element["index"].numpy()
        assert index.tolist() == batch.tolist()
        assert element["weights"].numpy().tolist() == [1.0] * len(batch)
        assert int(element["global_count"]) == len(batch)
        lengths = element["lengths"].numpy()
        assert lengths.tolist() == [len(x[i]) for i in index]
        for row, i in enumerate(index):  # labels travel with their row
            assert element["labels"].numpy()[row, :lengths[row]].tolist() == labels[i].tolist()
        seen.extend(index.tolist())
    assert sorted(seen) == list(range(len(x)))


class InputContext:
    def __init__(self, pipelines, pipeline_id):
        self.num_input_pipelines = pipelines
        self.input_pipeline_id = pipeline_id


class FakeStrategy:
    """What distributed_dataset uses of a strategy, for N replicas on 1 or more input pipelines."""

    def __init__(self, replicas, pipelines=1):
        self.num_replicas_in_sync = replicas
        self.pipelines = pipelines

    def distribute_datasets_from_function(self, dataset_fn):
        return [list(dataset_fn(InputContext(self.pipelines, k)).as_numpy_iterator())
                for k in range(self.pipelines)]


@pytest.mark.parametrize("replicas, pipelines", [(2, 1), (2, 2), (3, 1), (4, 2)])
def test_replica_slices_cover_rows_and_pad_empty_ones(corpus, replicas, pipelines):
    p, encoded, labels, x = corpus
    # a last batch of 1 row: the other replicas have nothing
    batches = length_bucketed_batches(encoded.row_length, 11)
    assert len(batches[-1]) < replicas
    per_pipeline = distributed_dataset(FakeStrategy(replicas, pipelines), p, encoded, lambda: batches,
                                       labels)
    assert len(per_pipeline) == pipelines
    local = replicas // pipelines
    real, empty = Counter(), 0
    for k, slices in enumerate(per_pipeline):
        assert len(slices) == len(batches) * local
        for b, rows in enumerate(batches):
            bounds = replica_bounds(len(rows), replicas)[k * local:(k + 1) * local]
            for part, (start, end) in zip(slices[b * local:(b + 1) * local], bounds):
                assert int(part["global_count"]) == len(rows)
                if start == end:
                    # a replica without a row: one copied row, weight 0, index -1
                    assert part["index"].tolist() == [-1]
                    assert part["weights"].tolist() == [0.0]
                    assert part["chars"].shape[0] == part["lengths"].shape[0] == 1
                    empty += 1
                else:
                    assert part["index"].tolist() == rows[start:end].tolist()
                    assert part["weights"].tolist() == [1.0] * (end - start)
                    real.update(part["index"].tolist())
    assert real == Counter(range(len(x)))
    assert empty == replicas - len(batches[-1])


def test_two_cpu_replicas_in_a_subprocess(tmp_path):
    """A real MirroredStrategy over DELFT_CPU_REPLICAS=2 logical CPUs: every row once, empty padded."""
    script = tmp_path / "replicas.py"
    out = tmp_path / "out.json"
    script.write_text(textwrap.dedent(f"""
        import json
        import numpy as np
        from delft.utilities import devices
        devices.configure_logical_cpu_devices()
        from delft.sequenceLabelling.batching import distributed_dataset, length_bucketed_batches
        from delft.sequenceLabelling.preprocess import Preprocessor
        strategy = devices.get_strategy(True)
        x = [["a"] * n for n in (3, 1, 4, 1, 5)]
        p = Preprocessor(5); p.fit(x, [["O"] * len(s) for s in x])
        corpus = p.encode(x)
        batches = length_bucketed_batches(corpus.row_length, 2)
        found = []
        for element in distributed_dataset(strategy, p, corpus, lambda: batches):
            found.append([[strategy.experimental_local_results(element[k])[r].numpy().tolist()
                           for k in ("index", "weights")] for r in range(2)])
        json.dump({{"replicas": strategy.num_replicas_in_sync, "found": found}}, open({str(out)!r}, "w"))
    """))
    completed = run_python([script], cwd=tmp_path, timeout=180, DELFT_CPU_REPLICAS=2)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["replicas"] == 2
    # 5 rows in batches of 2, sorted by length: [1, 3], [0, 2], [4]; each split over 2 replicas
    assert result["found"] == [[[[1], [1.0]], [[3], [1.0]]],
                               [[[0], [1.0]], [[2], [1.0]]],
                               [[[4], [1.0]], [[-1], [0.0]]]]


def test_dummy_batch_matches_signature(corpus):
    p = corpus[0]
    batch = dummy_batch(p.batch_signature(True))
    assert set(batch) == {"chars", "lengths", "labels"}
    assert batch["chars"].shape == (1, 1, 1)
    assert batch["lengths"].tolist() == [1]
