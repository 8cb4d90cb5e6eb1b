"""Batching: length buckets, replica slices for 1 and N replicas on 1 or N workers, prefetching."""
import itertools
import json
import textwrap
import threading
import time
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from conftest import run_python
from delft.sequenceLabelling.batching import (POOL_BATCHES, ReplicaFeeder, batches_per_epoch,
                                              dummy_batch, global_batch_size,
                                              length_bucketed_batches, padding_groups, prefetched,
                                              replica_bounds)
from delft.sequenceLabelling.preprocess import WordPreprocessor
from delft.training import batching


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


@pytest.mark.parametrize("n", [0, 1, 59, 61, 1000, 3001])
@pytest.mark.parametrize("pool_batches", [1, 2, 5, 50])
def test_every_pool_size_covers_every_row_once_in_the_batches_counted(n, pool_batches):
    lengths = np.random.default_rng(n).integers(1, 80, n)
    batches = length_bucketed_batches(lengths, 20, np.random.default_rng(3), pool_batches)
    assert covered(batches) == Counter(range(n))
    assert all(1 <= len(b) <= 20 for b in batches)
    assert len(batches) == batches_per_epoch(n, 20, pool_batches)


def test_small_pools_give_a_small_set_new_batches_each_epoch_at_the_cost_of_padding():
    """300 rows, fewer than one pool of 50 batches: sorted whole, epochs share most of their
    batches' row pairs; pool_batches=1 (random batches, the default) shares few, and pads most."""
    lengths = np.random.default_rng(0).integers(1, 50, 300)

    def pairs(batches):
        return {(i, j) for b in batches for i in b.tolist() for j in b.tolist() if i < j}

    kept, padding = {}, {}
    assert POOL_BATCHES == 1
    for pool in (50, 5, 1):
        rng = np.random.default_rng(5)
        epoch1 = length_bucketed_batches(lengths, 20, rng, pool)
        epoch2 = length_bucketed_batches(lengths, 20, rng, pool)
        kept[pool] = len(pairs(epoch1) & pairs(epoch2)) / len(pairs(epoch1))
        padding[pool] = sum(lengths[b].max() * len(b) - lengths[b].sum() for b in epoch2)
    assert kept[50] > 0.7 > 0.3 > kept[5] > kept[1] and kept[1] < 0.1
    assert padding[50] < padding[5] < padding[1]


def test_without_rng_batches_are_sorted_by_length():
    lengths = np.random.default_rng(0).integers(1, 100, 500)
    batches = length_bucketed_batches(lengths, 32)
    flat = np.concatenate(batches)
    assert np.all(np.diff(lengths[flat]) >= 0)


def test_with_rng_batches_are_length_sorted_within_pools_and_shuffled():
    lengths = np.random.default_rng(1).integers(1, 100, 32 * 50 * 2)
    batches = length_bucketed_batches(lengths, 32, np.random.default_rng(9), pool_batches=50)
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


def test_global_batch_size(caplog):
    assert global_batch_size(60, 1) == 60
    assert global_batch_size(60, 4) == 60
    assert not caplog.records
    assert global_batch_size(61, 4) == 64
    assert global_batch_size(1, 3) == 3
    assert "not a multiple of the 4 replicas: using 64" in caplog.records[0].getMessage()


def test_global_batch_size_writes_nothing_to_stdout(capsys):
    global_batch_size(61, 7)
    assert capsys.readouterr().out == ""


# -- replica slices ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    x = [[f"w{int(v)}" for v in rng.integers(0, 50, int(n))] for n in rng.integers(1, 12, 23)]
    y = [["B-<a>" if i % 3 == 0 else "O" for i in range(len(s))] for s in x]
    p = WordPreprocessor(max_char_length=5)
    p.fit(x, y)
    return p, p.encode(x), p.encode_labels(y), x


class FakeStrategy:
    """What ReplicaFeeder uses of a strategy: worker ``worker`` of ``workers``, N replicas in all."""

    def __init__(self, replicas, workers=1, worker=0):
        self.num_replicas_in_sync = replicas
        self.local = replicas // workers
        self.first = worker * self.local

    def experimental_distribute_values_from_function(self, value_fn):
        return [value_fn(tf.distribute.experimental.ValueContext(self.first + i,
                                                                 self.num_replicas_in_sync))
                for i in range(self.local)]

    def experimental_local_results(self, values):
        return tuple(values)


def test_one_replica_takes_the_whole_batch_with_its_index(corpus):
    p, encoded, labels, x = corpus
    feeder = ReplicaFeeder(tf.distribute.get_strategy(), p)
    assert feeder.local_replicas == [0]
    seen = []
    for rows in length_bucketed_batches(encoded.row_length, 5):
        (part,) = feeder.slices(encoded, rows, labels)
        index = part["index"]
        assert index.tolist() == rows.tolist()
        assert part["weights"].tolist() == [1.0] * len(rows)
        assert int(part["global_count"]) == len(rows)
        lengths = part["lengths"]
        assert lengths.tolist() == [len(x[i]) for i in index]
        for row, i in enumerate(index):  # labels travel with their row
            assert part["labels"][row, :lengths[row]].tolist() == labels[i].tolist()
        seen.extend(index.tolist())
    assert sorted(seen) == list(range(len(x)))


def test_a_prediction_slice_carries_what_its_step_signature_names(corpus):
    """Without labels (tagging) a slice has no loss weights nor global count: its step would
    bind and convert them for nothing; with labels it has both, as the train step's signature."""
    p, encoded, labels, x = corpus
    feeder = ReplicaFeeder(tf.distribute.get_strategy(), p)
    rows = length_bucketed_batches(encoded.row_length, 5)[0]
    for label_ids, with_labels in ((None, False), (labels, True)):
        (part,) = feeder.slices(encoded, rows, label_ids)
        (signature,) = feeder.step_signature(with_labels)[0]
        assert sorted(part) == sorted(signature)
        assert ("weights" in part) == ("global_count" in part) == with_labels


@pytest.mark.parametrize("replicas, workers", [(2, 1), (2, 2), (3, 1), (4, 2), (6, 3)])
def test_replica_slices_cover_rows_once_across_workers(corpus, replicas, workers):
    p, encoded, labels, x = corpus
    # a last batch of 1 row: the other replicas have nothing
    batches = length_bucketed_batches(encoded.row_length, 11)
    assert len(batches[-1]) < replicas
    real, empty = Counter(), 0
    for worker in range(workers):
        feeder = ReplicaFeeder(FakeStrategy(replicas, workers, worker), p)
        local = replicas // workers
        assert feeder.local_replicas == list(range(worker * local, (worker + 1) * local))
        for rows in batches:
            parts = feeder.slices(encoded, rows, labels)
            assert len(parts) == local  # a worker pads only its own replicas' slices
            bounds = [replica_bounds(len(rows), replicas)[r] for r in feeder.local_replicas]
            width = int(encoded.row_length[rows].max())
            for part, (start, end) in zip(parts, bounds):
                assert int(part["global_count"]) == len(rows)
                # every slice of a global batch has its width, so outputs can be gathered
                assert part["chars"].shape[1] == part["labels"].shape[1] == width
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
    """A real MirroredStrategy over DELFT_CPU_REPLICAS=2 logical CPUs: a step compiled once over
    the feeder's slices gathers every row once, in replica order, the empty slice marked."""
    script = tmp_path / "replicas.py"
    out = tmp_path / "out.json"
    script.write_text(textwrap.dedent(f"""
        import json
        import numpy as np
        import tensorflow as tf
        from delft.utilities import devices
        devices.configure_logical_cpu_devices()
        from delft.sequenceLabelling.batching import ReplicaFeeder, length_bucketed_batches
        from delft.sequenceLabelling.preprocess import WordPreprocessor
        strategy = devices.get_strategy(True)
        x = [["a"] * n for n in (3, 1, 4, 1, 5)]
        p = WordPreprocessor(5); p.fit(x, [["O"] * len(s) for s in x])
        corpus = p.encode(x)
        feeder = ReplicaFeeder(strategy, p)

        labels = p.encode_labels([["O"] * len(s) for s in x])

        @tf.function(input_signature=feeder.step_signature(True))
        def step(slices):
            values = feeder.distribute(slices)
            out = strategy.run(lambda groups: (groups[0]["index"], groups[0]["weights"],
                                               tf.shape(groups[0]["chars"])[1]),
                               args=(values,))
            return (strategy.gather(out[0], 0), strategy.gather(out[1], 0),
                    strategy.experimental_local_results(out[2]))

        found = []
        for rows in length_bucketed_batches(corpus.row_length, 2):
            index, weights, widths = step(feeder.slices(corpus, rows, labels))
            found.append([index.numpy().tolist(), weights.numpy().tolist(),
                          [int(w) for w in widths]])
        json.dump({{"replicas": strategy.num_replicas_in_sync, "found": found,
                    "traces": step.experimental_get_tracing_count()}}, open({str(out)!r}, "w"))
    """))
    completed = run_python([script], cwd=tmp_path, timeout=180, DELFT_CPU_REPLICAS=2)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["replicas"] == 2
    # 5 rows in batches of 2, sorted by length: [1, 3], [0, 2], [4]; each split over 2 replicas,
    # both slices as wide as the batch's longest row
    assert result["found"] == [[[1, 3], [1.0, 1.0], [1, 1]],
                               [[0, 2], [1.0, 1.0], [4, 4]],
                               [[4, -1], [1.0, 0.0], [5, 5]]]
    assert result["traces"] == 1


def padded_cells(lengths, bounds):
    return sum((end - start) * lengths[end - 1] for start, end in bounds if end > start)


def every_grouping(count, groups):
    """Every cut of ``count`` rows into ``groups`` contiguous non-empty groups."""
    for cuts in itertools.combinations(range(1, count), groups - 1):
        edges = (0,) + cuts + (count,)
        yield list(zip(edges[:-1], edges[1:]))


@pytest.mark.parametrize("groups", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", range(24))
def test_padding_groups_pad_fewest_cells_of_every_grouping(groups, seed, monkeypatch):
    rng = np.random.default_rng(seed)
    # blocks of ends of 1 to 3 rows (256 in use): their edges cross these few rows
    monkeypatch.setattr(batching, "ENDS_PER_BLOCK", 1 + seed % 3)
    # half the draws from few lengths, so that several groupings tie
    lengths = np.sort(rng.integers(1, [60, 4][seed % 2], rng.integers(1, 11)))
    bounds = padding_groups(lengths, groups)
    assert len(bounds) == groups
    assert [b[0] for b in bounds[1:]] == [b[1] for b in bounds[:-1]]  # contiguous
    assert bounds[0][0] == 0 and bounds[-1][1] == len(lengths)
    if len(lengths) >= groups:
        assert all(end > start for start, end in bounds)
        # the fewest cells; among groupings as few, the earliest last cut, then the earliest
        # cut before it...: the same groups, hence the same steps, whatever finds them
        assert bounds == min(every_grouping(len(lengths), groups), key=lambda grouping: (
            padded_cells(lengths, grouping), [start for start, _ in reversed(grouping)]))
    else:  # fewer rows than groups: one row per group, then empty groups
        assert bounds == [(i, i + 1) for i in range(len(lengths))] + \
            [(len(lengths), len(lengths))] * (groups - len(lengths))


def test_padding_groups_of_hundreds_of_rows_do_not_depend_on_the_block_of_ends(monkeypatch):
    lengths = np.sort(np.random.default_rng(5).integers(1, 300, 600))
    in_use = {groups: padding_groups(lengths, groups) for groups in (2, 3, 4)}
    monkeypatch.setattr(batching, "ENDS_PER_BLOCK", 7)
    assert {groups: padding_groups(lengths, groups) for groups in (2, 3, 4)} == in_use
    cells = [padded_cells(lengths, in_use[groups]) for groups in (2, 3, 4)]
    assert cells == sorted(cells, reverse=True) and cells[2] < cells[0]


def test_padding_groups_of_a_long_tail_pad_far_less_than_the_batch():
    lengths = np.array([3] * 18 + [400, 1000])
    bounds = padding_groups(lengths, 2)
    assert bounds == [(0, 18), (18, 20)]
    assert padded_cells(lengths, bounds) == 18 * 3 + 2 * 1000 < 20 * 1000 / 9


@pytest.mark.parametrize("replicas, workers", [(1, 1), (2, 1), (2, 2), (3, 1)])
@pytest.mark.parametrize("groups", [2, 3])
def test_training_groups_cover_each_replicas_rows_sorted_each_padded_to_its_own(
        corpus, replicas, workers, groups):
    p, encoded, labels, x = corpus
    batches = length_bucketed_batches(encoded.row_length, 7, np.random.default_rng(1))
    real = Counter()
    for worker in range(workers):
        feeder = ReplicaFeeder(FakeStrategy(replicas, workers, worker), p, groups)
        for rows in batches:
            ordered = rows[np.argsort(encoded.row_length[rows], kind="stable")]
            parts = feeder.slices(encoded, rows, labels)
            assert len(parts) == len(feeder.local_replicas) * groups
            bounds = replica_bounds(len(rows), replicas)
            for at, replica in enumerate(feeder.local_replicas):
                start, end = bounds[replica]
                mine = parts[at * groups:(at + 1) * groups]
                taken = [i for part in mine for i, w in zip(part["index"], part["weights"]) if w]
                assert taken == ordered[start:end].tolist()  # the replica's rows, by length
                for part in mine:
                    assert int(part["global_count"]) == len(rows)
                    width = part["chars"].shape[1]
                    assert width == part["labels"].shape[1] == int(part["lengths"].max())
                    for row, i in zip(range(len(part["index"])), part["index"]):
                        if i >= 0:
                            assert part["labels"][row, :len(x[i])].tolist() == labels[i].tolist()
                real.update(taken)
    assert real == Counter(range(len(x)))


def test_prefetched_keeps_order_and_raises_the_producers_error():
    assert list(prefetched(iter(range(50)), depth=3)) == list(range(50))

    def failing():
        yield 1
        raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch"):
        list(prefetched(failing()))


def test_prefetched_stops_its_thread_when_the_consumer_stops():
    before = threading.active_count()
    produced = []

    def endless():
        while True:
            produced.append(1)
            yield len(produced)

    for item in prefetched(endless(), depth=2):
        if item == 3:
            break
    time.sleep(0.3)
    assert threading.active_count() == before
    assert len(produced) <= 3 + 2 + 1  # never more than the buffer ahead


def test_dummy_batch_matches_signature(corpus):
    p = corpus[0]
    batch = dummy_batch(p.batch_signature(True))
    assert set(batch) == {"chars", "lengths", "labels"}
    assert batch["chars"].shape == (2, 2, 2)
    assert batch["lengths"].tolist() == [1, 1]
