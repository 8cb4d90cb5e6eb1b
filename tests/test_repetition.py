"""A loaded model called again and again, as GROBID does for days: nothing a call makes outlives it.

The corpus of each call and its batches are freed when the call returns (no reference cycle, no
cache, no tf.data generator state); object counts, threads and compiled steps stay the same over
hundreds of calls, on one device and on two replicas. The RSS curves (10,000 calls, a 200 MB file)
come from benchmarks/rss_repetition.py, which the slow test runs.
"""
import collections
import gc
import json
import os
import textwrap
import threading
import weakref

import pytest

from conftest import MODEL_NAME, REPO_ROOT, run_python

CALL = [["12", "June", "2005"]] * 3
MANY = [["12", "June", "2005", "x"] * (i % 7 + 1) for i in range(300)]  # several batches


def calls(model, multi_gpu=False):
    """One round of the calls a server makes: small, several batches (prefetch thread), JSON."""
    model.tag(CALL, None, multi_gpu=multi_gpu)
    model.tag(MANY, None, batch_size=20, multi_gpu=multi_gpu)
    model.tag(["12 June 2005"], "json", multi_gpu=multi_gpu)


def object_counts():
    """Live GC-tracked objects by type, as a plain dict (of str and int: itself untracked)."""
    gc.collect()
    return dict(collections.Counter(type(item).__qualname__ for item in gc.get_objects()))


def growth(before, after):
    """Types whose count grew, by how much."""
    return {name: count - before.get(name, 0) for name, count in after.items()
            if count > before.get(name, 0)}


def per_call_growth(grown, rounds):
    """The types that grew by a tenth of ``rounds`` or more: an object kept per call would grow by
    ``rounds`` (3 calls a round); a few objects of the test harness come and go."""
    return {name: count for name, count in grown.items() if count >= rounds / 10}


def test_each_calls_corpus_is_freed_when_the_call_returns(loaded_date, monkeypatch):
    corpora = []
    preprocessor_class = type(loaded_date.p)
    encode = preprocessor_class.encode

    def recording_encode(self, *args, **kwargs):
        corpus = encode(self, *args, **kwargs)
        corpora.append(weakref.ref(corpus))
        return corpus

    monkeypatch.setattr(preprocessor_class, "encode", recording_encode)
    calls(loaded_date)
    # freed by reference counting as the call returns (no gc.collect): nothing holds it
    assert len(corpora) == 3 and [ref() for ref in corpora] == [None] * 3


def test_counts_threads_and_compiled_steps_stay_the_same(loaded_date):
    for _ in range(10):
        calls(loaded_date)
    before, threads = object_counts(), threading.active_count()
    predictors = list(loaded_date._predictors.values())
    traces = [p._step.experimental_get_tracing_count() for p in predictors]
    for _ in range(100):
        calls(loaded_date)
    assert per_call_growth(growth(before, object_counts()), 100) == {}
    assert threading.active_count() == threads
    assert list(loaded_date._predictors.values()) == predictors
    assert [p._step.experimental_get_tracing_count() for p in predictors] == traces == [1]


def full_collections_of(call):
    """How many full (generation-2) collections Python's garbage collector ran during ``call()``."""
    full = []

    def record(phase, info):
        if phase == "start" and info["generation"] == 2:
            full.append(info)

    gc.callbacks.append(record)
    try:
        call()
    finally:
        gc.callbacks.remove(record)
    return len(full)


def test_the_call_that_traces_ends_with_the_full_collection_the_next_calls_would_meet(
        trained_date):
    model = trained_date.load()  # not traced yet
    assert full_collections_of(lambda: model.tag(MANY, None, batch_size=20)) == 1
    assert full_collections_of(lambda: model.tag(MANY, None, batch_size=20)) == 0


def test_a_command_s_one_tag_file_or_eval_forces_no_collection(trained_date, tmp_path,
                                                                forced_collections):
    """A command tags once, in one tag_file call (or evaluates once): it would only pay for it."""
    texts = tmp_path / "texts.txt"
    texts.write_text("12 June 2005\nMarch 2001\n")
    trained_date.load().tag_file(str(texts), "json", str(tmp_path / "out.json"))
    trained_date.load().eval(trained_date.x_eval[:50], trained_date.y_eval[:50])
    assert forced_collections == []
    trained_date.load().tag(CALL)  # the spy sees what tag forces
    assert forced_collections == [()]


def test_the_same_on_two_replicas(trained_date, tmp_path):
    script = tmp_path / "replicas.py"
    out = tmp_path / "out.json"
    script.write_text(textwrap.dedent(f"""
        import json, sys, threading, weakref
        sys.path.insert(0, {str(REPO_ROOT / "tests")!r})
        from conftest import loaded_sequence
        from test_repetition import calls, growth, object_counts, per_call_growth
        model = loaded_sequence({MODEL_NAME!r}, {str(trained_date.models_dir)!r}, multi_gpu=True)
        corpora = []
        encode = type(model.p).encode
        def recording_encode(self, *args, **kwargs):
            corpus = encode(self, *args, **kwargs)
            corpora.append(weakref.ref(corpus))
            return corpus
        type(model.p).encode = recording_encode
        alive, encoded = 0, 0
        def forget():  # the weak references are the test's own objects: not counted
            global alive, encoded
            alive += sum(ref() is not None for ref in corpora)
            encoded += len(corpora)
            corpora.clear()
        for _ in range(10):
            calls(model, multi_gpu=True)
        forget()
        before, threads = object_counts(), threading.active_count()
        for _ in range(50):
            calls(model, multi_gpu=True)
        forget()
        json.dump({{"replicas": model._strategy.num_replicas_in_sync,
                    "alive": alive, "calls": encoded,
                    "growth": per_call_growth(growth(before, object_counts()), 50),
                    "threads": [threads, threading.active_count()],
                    "traces": [p._step.experimental_get_tracing_count()
                               for p in model._predictors.values()]}}, open({str(out)!r}, "w"))
    """))
    completed = run_python([script], cwd=tmp_path, timeout=400, DELFT_CPU_REPLICAS=2)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["replicas"] == 2 and result["calls"] == 180
    assert result["alive"] == 0 and result["growth"] == {}
    assert result["threads"][0] == result["threads"][1] and result["traces"] == [1]


@pytest.mark.slow
def test_rss_is_flat_over_10000_calls_and_a_large_file(trained_date, tmp_path):
    """benchmarks/rss_repetition.py: RSS after 10,000 small calls within 5% of that after 100;
    tag_file's peak RSS over a large matrix (DELFT_RSS_MATRIX_MB, default 20 MB: 14 chunks of 5,000
    sequences; the report's figure is for 200 MB) within 10% of a 2 MB run's."""
    megabytes = os.environ.get("DELFT_RSS_MATRIX_MB", "20")
    completed = run_python([REPO_ROOT / "benchmarks" / "rss_repetition.py", "--calls", "10000",
                            "--matrix-mb", megabytes, "--models-dir", trained_date.models_dir,
                            "--json"], cwd=tmp_path, timeout=3000)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout)
    assert all(point["live_encoded_corpora"] == 0 for point in result["calls"]["curve"])
    assert result["calls"]["ratio"] <= 1.05, result["calls"]
    assert result["files"]["ratio"] <= 1.10, {k: v["peak_rss_mb"]
                                              for k, v in result["files"]["runs"].items()}
