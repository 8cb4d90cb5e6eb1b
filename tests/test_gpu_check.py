"""benchmarks/gpu_check.sh on this CPU-only machine, and the cross-device ops it asks devices for."""
import sys
import textwrap

from conftest import REPO_ROOT, run_python, subprocess_env


def test_gpu_check_on_a_cpu_only_machine_says_so_and_exits_0(tmp_path):
    import subprocess

    done = subprocess.run(["bash", str(REPO_ROOT / "benchmarks" / "gpu_check.sh")], cwd=tmp_path,
                          env=subprocess_env(PYTHON=sys.executable), capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("gpu_check: no GPU on this machine (CPU only): nothing to check")


def test_cross_device_ops_are_chosen_in_devices(tmp_path):
    script = tmp_path / "ops.py"
    script.write_text(textwrap.dedent("""
        import delft
        from delft.utilities import devices
        from delft.utilities.errors import ConfigurationError
        chosen = devices.get_strategy(True)  # DELFT_CROSS_DEVICE_OPS=hierarchical_copy
        asked = devices.get_strategy(True, cross_device_ops="reduce_to_one")
        print(chosen.num_replicas_in_sync, type(chosen.extended._cross_device_ops).__name__,
              type(asked.extended._cross_device_ops).__name__, devices.get_strategy(True) is chosen)
        try:
            devices.get_strategy(True, cross_device_ops="ring")
        except ConfigurationError as error:
            print(error)
    """))
    done = run_python([script], cwd=tmp_path, timeout=180, DELFT_CPU_REPLICAS=2,
                      DELFT_CROSS_DEVICE_OPS="hierarchical_copy")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [
        "2 HierarchicalCopyAllReduce ReductionToOneDevice True",
        "the ring all-reduce is a collective across workers: on one machine use nccl, "
        "hierarchical_copy or reduce_to_one"]


def test_stage_rows_time_every_stage_of_tagging_and_of_a_training_epoch(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
    import gpu_check
    from delft.utilities import devices

    x, y, _ = gpu_check.date_data()
    monkeypatch.setattr(gpu_check, "ROWS", [])
    gpu_check.check_stages(x[:120], y[:120], 150, devices.get_strategy(False), budget=1e9,
                           on_gpu=False, tag_batch=64, train_batch=60)
    stages = ["encoding", "bucketing and padding", "host to device", "compiled step",
              "device to host"]
    assert [(r[0], r[1], r[2]) for r in gpu_check.ROWS] == [
        ("stages BidLSTM_CRF tagging", f"batch 64: {stage}", "PASS")
        for stage in stages + ["stitching"]] + [
        ("stages BidLSTM_CRF tagging", "batch 64: host stages together", "INFO")] + [
        ("stages BidLSTM_CRF training epoch", f"batch 60: {stage}", "PASS")
        for stage in stages] + [
        ("stages BidLSTM_CRF training epoch", "batch 60: host stages together", "INFO")]
    assert all(r[3].endswith(" ms / 1,000 sequences") for r in gpu_check.ROWS)


def test_kernel_rows_compare_each_way_on_the_same_weights(monkeypatch):
    """The rows of cuDNN against BlockLSTM (on this CPU both ways run BlockLSTM)."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
    import gpu_check
    from delft.utilities import devices

    x, y, _ = gpu_check.date_data()
    monkeypatch.setattr(gpu_check, "ROWS", [])
    gpu_check.check_kernels(x[:120], y[:120], x[:150], devices.get_strategy(False), budget=1e9,
                            batch_size=64)
    assert [(r[0], r[1], r[2]) for r in gpu_check.ROWS] == [
        ("BidLSTM_CRF cuDNN against BlockLSTM", "cuDNN", "PASS"),
        ("BidLSTM_CRF cuDNN against BlockLSTM", "BlockLSTM", "PASS")]
    assert all("tokens/s" in r[3] and "labels the same" in r[4] for r in gpu_check.ROWS)
