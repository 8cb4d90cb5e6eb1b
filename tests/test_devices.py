"""devices: the strategy helpers, and what closing them may touch in a host process."""
import json
import textwrap

from conftest import run_python


def test_close_strategies_leaves_the_host_thread_pool_running(tmp_path):
    """``close_strategies`` closes the pools TF's cross-device ops opened, never one the host owns.

    GROBID, or any server that embeds delft, has ``multiprocessing.pool.ThreadPool`` objects of its
    own in the same process; after a multi-device job (and at exit, through atexit) delft must leave
    them running.
    """
    script = tmp_path / "host_pool.py"
    out = tmp_path / "out.json"
    script.write_text(textwrap.dedent(f"""
        import json
        import multiprocessing.pool
        from multiprocessing.pool import ThreadPool

        host_pool = ThreadPool(2)  # the host's, made before delft is imported
        result = {{"host_before": host_pool.map(abs, [-1, -2])}}

        opened = []  # every ThreadPool opened from here on (TF's cross-device ops)
        _init = multiprocessing.pool.ThreadPool.__init__

        def recording_init(self, *args, **kwargs):
            opened.append(self)
            _init(self, *args, **kwargs)

        multiprocessing.pool.ThreadPool.__init__ = recording_init

        from delft.utilities import devices
        devices.configure_logical_cpu_devices()
        import tensorflow as tf

        strategy = devices.get_strategy(True)
        result["replicas"] = strategy.num_replicas_in_sync
        result["strategy"] = type(strategy).__name__
        # an eager batch all-reduce (as Keras' metric aggregation does): CollectiveAllReduce opens a
        # ThreadPool, closes it, never joins it
        per_replica = strategy.run(lambda: tf.constant(1.0))
        reduced = strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.SUM,
                                                    [(per_replica, per_replica)])
        result["total"] = [float(v) for v in strategy.experimental_local_results(reduced[0])]
        result["tf_pools"] = len(opened)

        devices.close_strategies()

        result["tf_pool_states"] = [pool._state for pool in opened]
        result["tf_pool_workers_alive"] = sum(w.is_alive() for pool in opened for w in pool._pool)
        try:
            result["host_after"] = host_pool.map(abs, [-3, -4])
        except Exception as error:  # ValueError("Pool not running") once terminated
            result["host_error"] = repr(error)
        json.dump(result, open({str(out)!r}, "w"))
        host_pool.close()
        host_pool.join()
    """))
    completed = run_python([script], cwd=tmp_path, timeout=180, DELFT_CPU_REPLICAS=2)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(out.read_text())
    # the set-up really is multi-device (else close_strategies returns early and this is vacuous)
    assert result["replicas"] == 2, result
    assert result["strategy"] == "MirroredStrategy", result
    assert result["total"] == [2.0, 2.0], result
    assert result["tf_pools"] >= 1, result
    assert result["host_before"] == [1, 2]
    assert "host_error" not in result, (
        f"close_strategies terminated the host's own ThreadPool: {result['host_error']} ({result})")
    assert result["host_after"] == [3, 4]
    # and what TF opened is closed, its workers gone
    assert all(state in ("CLOSE", "TERMINATE") for state in result["tf_pool_states"]), result
    assert result["tf_pool_workers_alive"] == 0, result
