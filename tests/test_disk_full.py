"""A full disk, a damaged checkpoint, a killed writer: each leaves the last complete state and says
so in one line.

The full disks are small tmpfs mounts (root can make them; elsewhere those cases skip, and the
simulated ones below still run).
"""
import errno
import json
import os
import shutil
import socket
import subprocess
from contextlib import contextmanager

import pytest

from conftest import REPO_ROOT, SAMPLE_DATE, delft_stderr_lines, loaded_sequence, run_python
from delft.utilities.errors import DiskFullError

GROBID = REPO_ROOT / "delft" / "applications" / "grobidTagger.py"
DRIVER = REPO_ROOT / "tests" / "interrupted_training.py"


@contextmanager
def small_disk(path, size):
    """A tmpfs of ``size`` (e.g. "2m") mounted at ``path`` for the block."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def resize(path, size):
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)


def one_line_error(done):
    assert done.returncode == 2, done.stderr[-3000:]
    lines = delft_stderr_lines(done.stderr)
    assert lines[-1].startswith("error: "), lines
    assert not any("Traceback" in line or "[[" in line or line.startswith("Hint")
                   for line in lines), lines
    return lines[-1]


def train(output, *extra, driver=None):
    args = [GROBID, "date", "train", "--input", SAMPLE_DATE, "--output", output, "--seed", "3",
            "--max-epoch", "2", "--early-stop", "false", "--checkpoint-interval", "0", *extra]
    return run_python([DRIVER, driver, "-", "--", *args[1:]] if driver else args, timeout=300)


# -- a full disk -----------------------------------------------------------------------------------

def test_a_checkpoint_that_does_not_fit_keeps_the_last_and_the_same_command_resumes(tmp_path):
    """The sample model's checkpoint is about 1.9 MB: a 2 MB disk holds the first, not the second
    beside it. The run ends in one line, the folder holds ckpt-1 alone and complete, and once there
    is room the same command resumes from it and ends as a run that never stopped."""
    with small_disk(tmp_path / "disk", "2m") as disk:
        checkpoints = disk / "models" / "date-BidLSTM_CRF.checkpoints"
        stopped = train(disk / "models")
        assert one_line_error(stopped) == (
            f"error: {checkpoints}/ckpt-2: no space left on the device; ckpt-1, the last complete "
            "checkpoint, is kept: the same command resumes from it")
        assert sorted(os.listdir(checkpoints)) == [
            ".training.lock", "checkpoint", "ckpt-1.data-00000-of-00002",
            "ckpt-1.data-00001-of-00002", "ckpt-1.index"]
        assert not (disk / "models" / "date-BidLSTM_CRF").exists()
        resize(disk, "16m")
        resumed = train(disk / "models")
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "ckpt-1: 1 epoch(s) done, going on with epoch 2" in resumed.stderr
        with open(disk / "models" / "date-BidLSTM_CRF" / "model.weights.h5", "rb") as weights:
            resumed_weights = weights.read()
    uninterrupted = train(tmp_path / "models")
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    assert (tmp_path / "models" / "date-BidLSTM_CRF" / "model.weights.h5").read_bytes() == \
        resumed_weights


def test_a_model_that_does_not_fit_keeps_the_folder_it_was_replacing(tmp_path, trained_date):
    """The sample model is about 0.7 MB: a 1 MB disk holds it once, not its replacement beside it."""
    name = trained_date.model_dir.name
    with small_disk(tmp_path / "disk", "1m") as disk:
        model = trained_date.load()
        model.save(str(disk))
        with pytest.raises(DiskFullError) as raised:
            model.save(str(disk))
        assert str(raised.value) == (f"{disk / name}: no space left on the device; it keeps "
                                     "what it held")
        assert sorted(os.listdir(disk)) == [f".{name}.lock", name]
        texts = [["12", "June", "2005"]]
        assert loaded_sequence(name, disk).tag(texts) == model.tag(texts)


def test_tag_output_that_does_not_fit_keeps_the_file_it_was_replacing(tmp_path, trained_date):
    with small_disk(tmp_path / "disk", "64k") as disk:
        (disk / "out.json").write_text("old")
        filler = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(filler, b"x" * 4096)
        os.close(filler)
        done = run_python([GROBID, "date", "tag", "--input-model", trained_date.model_dir,
                           "--input", SAMPLE_DATE, "--file-out", disk / "out.json"], timeout=300)
        assert one_line_error(done) == (f"error: {disk / 'out.json'}: no space left on the "
                                        "device; it keeps what it held")
        assert sorted(os.listdir(disk)) == ["filler", "out.json"]
        assert (disk / "out.json").read_text() == "old"


def test_a_failed_checkpoint_write_removes_its_files(tmp_path, date_corpus, monkeypatch):
    """Without a small disk: the second save fails after TensorFlow wrote its files."""
    from delft.sequenceLabelling import Sequence
    from delft.utilities import atomic

    writes = []
    original = atomic.replaced_file

    @contextmanager
    def full_on_second_state_file(path, **kwargs):
        if os.path.basename(path) == "checkpoint":
            writes.append(path)
            if len(writes) == 2:
                raise OSError(errno.ENOSPC, "No space left on device", path)
        with original(path, **kwargs) as stream:
            yield stream

    monkeypatch.setattr(atomic, "replaced_file", full_on_second_state_file)
    x, y, _ = date_corpus
    model = Sequence("date", max_epoch=3, early_stop=False, batch_size=60, seed=1,
                     checkpoint_interval=0)
    checkpoints = tmp_path / "date.checkpoints"
    with pytest.raises(DiskFullError) as raised:
        model.train(x[:120], y[:120], checkpoint_dir=str(checkpoints))
    assert str(raised.value) == (f"{checkpoints}/ckpt-2: no space left on the device; ckpt-1, "
                                 "the last complete checkpoint, is kept: the same command resumes "
                                 "from it")
    assert sorted(os.listdir(checkpoints)) == [
        ".training.lock", "checkpoint", "ckpt-1.data-00000-of-00002",
        "ckpt-1.data-00001-of-00002", "ckpt-1.index"]  # ckpt-2's, written before, removed
    assert 'model_checkpoint_path: "ckpt-1"' in (checkpoints / "checkpoint").read_text()


# -- a damaged checkpoint, a killed writer ---------------------------------------------------------

def test_a_checkpoint_cut_short_is_refused_in_one_line(tmp_path):
    killed = train(tmp_path / "models", driver="SIGKILL:2:0")
    assert killed.returncode == -9, killed.stderr[-2000:]
    checkpoints = tmp_path / "models" / "date-BidLSTM_CRF.checkpoints"
    data = next(checkpoints.glob("ckpt-1.data-00000-of-*"))
    with open(data, "r+b") as cut:
        cut.truncate(data.stat().st_size // 2)
    refused = train(tmp_path / "models")
    message = one_line_error(refused)
    assert message.startswith(f"error: {checkpoints}/ckpt-1: damaged (") and message.endswith(
        ": its files were cut short, by a full disk or a kill while they were written); "
        "--no-resume starts afresh"), message
    assert train(tmp_path / "models", "--no-resume").returncode == 0


def test_the_temporary_files_of_killed_writers_are_removed_by_the_next_write(tmp_path,
                                                                             trained_date):
    host = socket.gethostname()
    killed = tmp_path / f".out.json.{host}-{_dead_pid()}.abcdefgh.tmp"
    alive = tmp_path / f".out.json.{host}-{os.getpid()}.zzzzzzzz.tmp"  # a writer still running
    other_host = tmp_path / ".out.json.elsewhere-1.abcdefgh.tmp"
    for path in (killed, alive, other_host):
        path.write_text("partial")
    done = run_python([GROBID, "date", "tag", "--input-model", trained_date.model_dir,
                       "--input", SAMPLE_DATE, "--file-out", tmp_path / "out.json"], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "out.json").read_text())["texts"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out.json")) == \
        sorted([alive.name, other_host.name])


def _dead_pid():
    """The process id of a process that has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid

