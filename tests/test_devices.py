"""devices: the one strategy module, and what a multi-device job leaves in a host process."""
import json
import textwrap

import pytest

from conftest import SAMPLE_DATE, delft_stderr_lines, run_python


def test_a_multi_device_job_leaves_the_host_alone(tmp_path):
    """GROBID, or any server embedding delft, has ``multiprocessing.pool.ThreadPool`` objects of
    its own: a 2-replica train, tag, save and load must leave them running, open no thread pool
    of TF's cross-device ops (delft never all-reduces eagerly: TF issue 50487's pools, closed but
    never joined, are what raised "Bad file descriptor" at exit), and end the process cleanly."""
    script = tmp_path / "host_pool.py"
    out = tmp_path / "out.json"
    script.write_text(textwrap.dedent(f"""
        import json
        import multiprocessing.pool
        from multiprocessing.pool import ThreadPool

        host_pool = ThreadPool(2)  # the host's, made before delft is imported
        result = {{"host_before": host_pool.map(abs, [-1, -2])}}
        opened = []  # every ThreadPool opened from here on
        _init = multiprocessing.pool.ThreadPool.__init__

        def recording_init(self, *args, **kwargs):
            opened.append(self)
            _init(self, *args, **kwargs)

        multiprocessing.pool.ThreadPool.__init__ = recording_init

        import delft
        from delft.sequenceLabelling import Sequence
        from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
        x, y, _ = load_data_and_labels_crf_file({str(SAMPLE_DATE)!r})
        model = Sequence("date-BidLSTM_CRF", max_epoch=1, batch_size=30, recurrent_dropout=0.0)
        model.train(x[:90], y[:90], x_valid=x[90:120], y_valid=y[90:120], multi_gpu=True)
        result["replicas"] = model._strategy.num_replicas_in_sync
        result["tagged"] = len(model.tag(x[:20], None, multi_gpu=True))
        model.save({str(tmp_path / "models")!r})
        again = Sequence("date-BidLSTM_CRF")
        again.load({str(tmp_path / "models")!r}, multi_gpu=True)
        result["tf_pools"] = len(opened)
        result["host_after"] = host_pool.map(abs, [-3, -4])
        # closed as a host does: one left open prints Python's "Exception ignored in
        # Pool.__del__" at exit once keras is imported (``import keras`` alone does)
        host_pool.close()
        host_pool.join()
        json.dump(result, open({str(out)!r}, "w"))
    """))
    completed = run_python([script], cwd=tmp_path, timeout=300, DELFT_CPU_REPLICAS=2)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result == {"host_before": [1, 2], "replicas": 2, "tagged": 20, "tf_pools": 0,
                      "host_after": [3, 4]}
    for noise in ("Bad file descriptor", "Exception ignored", "Traceback"):
        assert noise not in completed.stderr


def test_malformed_replica_count_is_one_line_when_a_strategy_is_asked_for(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text(textwrap.dedent("""
        import delft  # must not fail: --help, a host process
        from delft.utilities import devices
        from delft.utilities.errors import ConfigurationError
        assert devices.get_strategy(False).num_replicas_in_sync == 1
        try:
            devices.get_strategy(True)
        except ConfigurationError as error:
            print(error)
    """))
    completed = run_python([script], cwd=tmp_path, timeout=120, DELFT_CPU_REPLICAS="abc")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip() == "DELFT_CPU_REPLICAS must be a number of replicas, not 'abc'"
    assert not [line for line in delft_stderr_lines(completed.stderr) if "Traceback" in line]


@pytest.mark.parametrize("replicas", ["3"])
def test_more_replicas_than_cores_is_a_warning(tmp_path, replicas, monkeypatch):
    script = tmp_path / "many.py"
    script.write_text("import os\nos.cpu_count = lambda: 2\nimport delft\n")
    completed = run_python([script], cwd=tmp_path, timeout=120, DELFT_CPU_REPLICAS=replicas)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert f"DELFT_CPU_REPLICAS={replicas} is more than the 2 CPU cores" in completed.stderr


# what the CLIs pass to configure_cpu_ops for each family of model: large_ops
CPU_OPS = {"rnn": "0", "transformer": "1", "classifier": "1"}


def test_rnn_commands_run_one_thread_per_op_transformers_keep_the_default(tmp_path):
    """configure_cpu_ops: one intra-op thread for the RNN family on a machine without GPU;
    TensorFlow's default (0) for transformers, under a TF_NUM_INTRAOP_THREADS of the user's, and
    once TensorFlow has started (no error then)."""
    script = tmp_path / "threads.py"
    script.write_text(textwrap.dedent("""
        import sys
        import tensorflow as tf
        from delft.utilities import devices
        devices.configure_cpu_ops(sys.argv[1] == "1")
        before = tf.config.threading.get_intra_op_parallelism_threads()
        tf.constant(1.0) + 1.0  # TensorFlow starts
        # an RNN command's call now: in the transformer case it would change 0 to 1 if it could
        devices.configure_cpu_ops(False)
        print(before, tf.config.threading.get_intra_op_parallelism_threads())
    """))
    cases = [("rnn", {}, "1 1"), ("transformer", {}, "0 0"), ("classifier", {}, "0 0"),
             ("rnn", {"TF_NUM_INTRAOP_THREADS": "2"}, "0 0")]
    for family, env, expected in cases:
        completed = run_python([script, CPU_OPS[family]], cwd=tmp_path, timeout=120, **env)
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert completed.stdout.strip() == expected, (family, env)


def test_rnns_run_eigen_kernels_transformers_and_classifiers_onednn(tmp_path):
    """configure_cpu_ops before TensorFlow is imported: oneDNN off for the sequence labeller's
    RNNs, on for its transformers and the classifiers (TensorFlow's own default is on only where
    the CPU has AVX-512), not for a TF_ENABLE_ONEDNN_OPTS of the user's, and not when TensorFlow
    was imported first (a library host: nothing changes)."""
    script = tmp_path / "kernels.py"
    script.write_text(textwrap.dedent("""
        import sys
        if sys.argv[2] == "imported":
            import tensorflow
        if sys.argv[1] != "none":
            from delft.utilities import devices
            devices.configure_cpu_ops(sys.argv[1] == "1")
        from tensorflow.python.util import _pywrap_util_port
        print(_pywrap_util_port.IsMklEnabled())
    """))
    unset = {"TF_ENABLE_ONEDNN_OPTS": ""}  # TensorFlow's default, whatever this process has
    # TensorFlow's own choice depends on the CPU (on by default where it has AVX-512 and the like)
    alone = run_python([script, "none", "fresh"], cwd=tmp_path, timeout=120, **unset)
    assert alone.returncode == 0, alone.stderr[-3000:]
    default = alone.stdout.strip()
    cases = [("rnn", "fresh", unset, "False"), ("transformer", "fresh", unset, "True"),
             ("classifier", "fresh", unset, "True"),
             ("rnn", "fresh", {"TF_ENABLE_ONEDNN_OPTS": "1"}, "True"),
             ("transformer", "fresh", {"TF_ENABLE_ONEDNN_OPTS": "0"}, "False"),
             ("rnn", "imported", unset, default), ("transformer", "imported", unset, default)]
    for family, start, env, expected in cases:
        completed = run_python([script, CPU_OPS[family], start], cwd=tmp_path, timeout=120, **env)
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert completed.stdout.strip() == expected, (family, start, env)


def test_commands_take_tensorflows_bfc_host_allocator(tmp_path):
    """configure_cpu_ops before TensorFlow is imported: host tensors from TensorFlow's BFC
    allocator (``TF_CPU_ALLOCATOR_USE_BFC``, read when TensorFlow makes its first CPU tensor) for
    every family, but not where the user set the variable, nor when TensorFlow was imported
    first (a library host: nothing changes)."""
    script = tmp_path / "allocator.py"
    script.write_text(textwrap.dedent("""
        import os
        import sys
        if sys.argv[2] == "imported":
            import tensorflow
        from delft.utilities import devices
        devices.configure_cpu_ops(sys.argv[1] == "1")
        print(os.environ.get("TF_CPU_ALLOCATOR_USE_BFC"))
    """))
    unset = {"TF_CPU_ALLOCATOR_USE_BFC": ""}
    cases = [("rnn", "fresh", unset, "true"), ("transformer", "fresh", unset, "true"),
             ("classifier", "fresh", unset, "true"),
             ("rnn", "fresh", {"TF_CPU_ALLOCATOR_USE_BFC": "false"}, "false"),
             ("rnn", "imported", unset, "")]
    for family, start, env, expected in cases:
        completed = run_python([script, CPU_OPS[family], start], cwd=tmp_path, timeout=120, **env)
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert completed.stdout.strip() == expected, (family, start, env)


def test_sequence_labellers_rnns_run_small_ops_transformers_and_classifiers_large_ones(
        monkeypatch):
    """What the CLIs' flow passes to configure_cpu_ops for each toolkit and architecture."""
    from types import SimpleNamespace

    from delft.applications import flow
    from delft.applications.toolkits import SEQUENCE_LABELLING, TEXT_CLASSIFICATION
    from delft.utilities import devices

    calls = []
    monkeypatch.setattr(devices, "configure_cpu_ops", lambda *args: calls.append(args))
    run = SimpleNamespace(args=SimpleNamespace(multi_gpu=False))
    cases = [(SEQUENCE_LABELLING, name, False) for name in
             ("BidLSTM_CRF", "BidLSTM_CRF_FEATURES", "BidGRU_CRF", "BidLSTM_ChainCRF")]
    cases += [(SEQUENCE_LABELLING, "BERT_CRF", True)]
    cases += [(TEXT_CLASSIFICATION, name, True) for name in ("gru", "lstm", "cnn", "bert")]
    for toolkit, name, large_ops in cases:
        flow._strategy(SimpleNamespace(toolkit=toolkit), run, name)  # tagging, evaluation
        assert calls.pop() == (large_ops, 1), name
        flow._strategy(SimpleNamespace(toolkit=toolkit), run, name, 2)  # a training's passes
        assert calls.pop() == (large_ops, 2), name


def test_a_trainings_passes_are_its_length_groups():
    """What ``_fit`` passes as a training's side-by-side passes: the labeller's length groups
    (its option), a classifier's (2 for bert's rows of their texts' lengths, 1 for word rows)."""
    from types import SimpleNamespace

    from delft.applications.toolkits import SEQUENCE_LABELLING, TEXT_CLASSIFICATION

    for groups in (1, 2, 3):
        labeller = SimpleNamespace(training_config=SimpleNamespace(length_groups=groups))
        assert SEQUENCE_LABELLING.training_passes(labeller) == groups
    for name, passes in (("bert", 2), ("gru", 1), ("cnn", 1)):
        classifier = SimpleNamespace(model_config=SimpleNamespace(architecture=name))
        assert TEXT_CLASSIFICATION.training_passes(classifier) == passes, name


def test_a_transformers_training_on_no_more_cores_than_its_passes_runs_one_thread_per_op(
        tmp_path):
    """configure_cpu_ops(large_ops, training_passes): large ops keep TensorFlow's default
    (every core per op) unless a training's train step runs at least as many passes side by
    side as there are cores (each pass then has a core); the RNN family one thread either way."""
    script = tmp_path / "passes.py"
    script.write_text(textwrap.dedent("""
        import os
        import sys
        os.cpu_count = lambda: int(sys.argv[3])
        import tensorflow as tf
        from delft.utilities import devices
        devices.configure_cpu_ops(sys.argv[1] == "1", int(sys.argv[2]))
        print(tf.config.threading.get_intra_op_parallelism_threads())
    """))
    cases = [("transformer", 1, 2, "0"), ("transformer", 2, 2, "1"), ("transformer", 3, 2, "1"),
             ("transformer", 2, 4, "0"), ("classifier", 2, 2, "1"), ("rnn", 1, 4, "1")]
    for family, passes, cores, expected in cases:
        completed = run_python([script, CPU_OPS[family], str(passes), str(cores)], cwd=tmp_path,
                               timeout=120, TF_NUM_INTRAOP_THREADS="")
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert completed.stdout.strip() == expected, (family, passes, cores)
