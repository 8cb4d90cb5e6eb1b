"""delft.utilities.atomic: folders and files replaced whole, the save lock, leftovers, links.

No model here (see test_save_safety.py for saves of real models, kills included): a "model" is a
folder of marker files whose content says which generation wrote it.
"""
import os
import shutil
import stat
import threading
import time

import pytest

from delft.training.saved_models import folder_identity, pinned_folder
from delft.utilities import atomic
from delft.utilities.errors import ConfigurationError

FILES = ("config.json", "preprocessor.json", "model.weights.h5")


def fill(folder, generation, delay=0.0):
    for name in FILES:
        with open(os.path.join(folder, name), "w") as out:
            out.write(str(generation))
        time.sleep(delay)


def generation_of(folder):
    """The one generation every file of ``folder`` holds; AssertionError when mixed or missing."""
    values = set()
    for name in FILES:
        with open(os.path.join(folder, name)) as stream:
            values.add(stream.read())
    assert len(values) == 1, values
    return int(values.pop())


def entries(folder):
    return sorted(os.listdir(folder))


# -- folders ---------------------------------------------------------------------------------------
def test_a_new_folder_then_a_replacement(tmp_path):
    target = tmp_path / "models" / "m"
    with atomic.replaced_directory(str(target)) as staging:
        fill(staging, 1)
    assert generation_of(target) == 1
    with atomic.replaced_directory(str(target)) as staging:
        fill(staging, 2)
    assert generation_of(target) == 2
    assert entries(tmp_path / "models") == [".m.lock", "m"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o777 & ~umask  # not mkdtemp's 0700


def test_a_failed_fill_keeps_the_old_folder_and_leaves_nothing(tmp_path):
    target = tmp_path / "m"
    with atomic.replaced_directory(str(target)) as staging:
        fill(staging, 1)
    for error in (RuntimeError, KeyboardInterrupt):
        with pytest.raises(error):
            with atomic.replaced_directory(str(target)) as staging:
                fill(staging, 2)
                raise error("disk full (simulated)")
        assert generation_of(target) == 1
        assert entries(tmp_path) == [".m.lock", "m"]


@pytest.mark.parametrize("exchange_supported", [True, False])
def test_at_every_instant_the_target_is_complete(tmp_path, monkeypatch, caplog,
                                                 exchange_supported):
    """A reader polling the target while 150 replacements run never finds it missing or mixed
    (with RENAME_EXCHANGE); the fallback for file systems without it has a gap, said in a log."""
    if not exchange_supported:
        monkeypatch.setattr(atomic, "exchange", lambda first, second: False)
    target = str(tmp_path / "m")
    with atomic.replaced_directory(target) as staging:
        fill(staging, 0)
    seen, gaps, stop = set(), [], threading.Event()

    def watch():
        """Read the target as Sequence.load does: a folder swapped while being read is read
        again; a target missing, or incomplete while it stayed the same folder, is a gap."""
        while not stop.is_set():
            with pinned_folder(target) as before:
                if before is None:
                    gaps.append("missing")
                    continue
                try:
                    seen.add(generation_of(target))
                except (FileNotFoundError, AssertionError) as error:
                    if folder_identity(target) == before:
                        gaps.append(error)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for generation in range(1, 151):
            with atomic.replaced_directory(target) as staging:
                fill(staging, generation)
    finally:
        stop.set()
        watcher.join()
    assert generation_of(target) == 150 and len(seen) > 10
    if exchange_supported:
        assert gaps == []
        assert "cannot exchange" not in caplog.text
    else:
        assert "cannot exchange two folders" in caplog.text
    assert entries(tmp_path) == [".m.lock", "m"]


def test_leftovers_of_killed_saves_are_removed_and_nothing_else(tmp_path):
    target = tmp_path / "m"
    with atomic.replaced_directory(str(target)) as staging:
        fill(staging, 1)
    leftovers = [".m.abcd_123", ".m.zz99yy88"]
    for name in leftovers:
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.weights.h5").write_text("half")
    kept = ["m.checkpoints", ".m.checkpoints", ".mm.abcd1234", ".m.abcd12345", "m.previous"]
    for name in kept:
        (tmp_path / name).mkdir()
    assert atomic.remove_leftovers(str(tmp_path), "m") == leftovers
    with atomic.replaced_directory(str(target)) as staging:
        fill(staging, 2)
    assert entries(tmp_path) == sorted([".m.lock", "m"] + kept)


def test_concurrent_replacements_are_serialised(tmp_path):
    """Two writers of one folder: the second waits for the first to finish, then replaces it."""
    target = str(tmp_path / "m")
    first_inside, order = threading.Event(), []

    def writer(generation, delay):
        with atomic.replaced_directory(target) as staging:
            order.append(("start", generation))
            first_inside.set()
            fill(staging, generation, delay)
            order.append(("end", generation))

    first = threading.Thread(target=writer, args=(1, 0.1))
    first.start()
    first_inside.wait(10)
    second = threading.Thread(target=writer, args=(2, 0.0))
    second.start()
    first.join()
    second.join()
    assert order == [("start", 1), ("end", 1), ("start", 2), ("end", 2)]
    assert generation_of(target) == 2
    assert entries(tmp_path) == [".m.lock", "m"]


def test_a_symlinked_target_is_followed(tmp_path):
    real = tmp_path / "store" / "m-v3"
    with atomic.replaced_directory(str(real)) as staging:
        fill(staging, 1)
    link = tmp_path / "models" / "m"
    link.parent.mkdir()
    link.symlink_to(real)
    with atomic.replaced_directory(str(link)) as staging:
        fill(staging, 2)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert generation_of(real) == 2
    assert entries(tmp_path / "models") == ["m"]
    assert entries(real.parent) == [".m-v3.lock", "m-v3"]


@pytest.mark.parametrize("what", ["dangling link", "link to a file", "a file"])
def test_a_target_that_is_no_folder_is_one_line(tmp_path, what):
    target = tmp_path / "m"
    (tmp_path / "file").write_text("x")
    if what == "dangling link":
        target.symlink_to(tmp_path / "nowhere")
    elif what == "link to a file":
        target.symlink_to(tmp_path / "file")
    else:
        target.write_text("x")
    def replace(path):
        with atomic.replaced_directory(path) as staging:
            fill(staging, 1)

    for check in (atomic.check_folder_destination, replace):
        with pytest.raises(ConfigurationError) as info:
            check(str(target))
        assert str(target) in str(info.value) and "\n" not in str(info.value)
    assert entries(tmp_path) == ["file", "m"]


def test_a_file_in_the_way_of_the_folder_is_one_line(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigurationError, match="afile: is a file, where a folder is expected"):
        atomic.check_folder_destination(str(tmp_path / "afile" / "sub" / "m"))
    with pytest.raises(ConfigurationError, match="afile"):
        with atomic.replaced_directory(str(tmp_path / "afile" / "m")):
            pass


# -- files -----------------------------------------------------------------------------------------
def test_a_file_is_replaced_once_complete(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")
    os.chmod(path, 0o640)
    with atomic.replaced_file(str(path)) as stream:
        stream.write("new")
        assert path.read_text() == "old"  # nothing visible until the end
    assert path.read_text() == "new"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640  # the file keeps its mode
    assert entries(tmp_path) == ["out.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")
    with pytest.raises(ValueError):
        with atomic.replaced_file(str(path)) as stream:
            stream.write("partial")
            raise ValueError("bad line 9")
    assert path.read_text() == "old"
    assert entries(tmp_path) == ["out.json"]
    with pytest.raises(ValueError):
        with atomic.replaced_file(str(tmp_path / "new.json")) as stream:
            raise ValueError("bad line 1")
    assert entries(tmp_path) == ["out.json"]


def test_a_symlinked_file_is_followed(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with atomic.replaced_file(str(link)) as stream:
        stream.write("new")
    assert link.is_symlink() and real.read_text() == "new"


def test_stdout_gets_the_whole_document_or_nothing(capsys):
    with atomic.replaced_file(None) as stream:
        stream.write("line 1\n")
        assert capsys.readouterr().out == ""
        stream.write("line 2\n")
    assert capsys.readouterr().out == "line 1\nline 2\n"
    with pytest.raises(ValueError):
        with atomic.replaced_file(None) as stream:
            stream.write("partial\n")
            raise ValueError("bad line")
    assert capsys.readouterr().out == ""


def test_file_destination_checks(tmp_path):
    (tmp_path / "folder").mkdir()
    with pytest.raises(ConfigurationError, match="is a folder"):
        atomic.check_file_destination(str(tmp_path / "folder"))
    assert atomic.check_file_destination(str(tmp_path / "new" / "out.json"))
    assert entries(tmp_path) == ["folder"]  # the check creates nothing


def test_a_read_only_folder_is_one_line(tmp_path, unprivileged):
    """As a user who cannot write there (root is made one without CAP_DAC_OVERRIDE)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        completed = unprivileged(
            "from delft.utilities import atomic\n"
            "from delft.utilities.errors import ConfigurationError\n"
            "for check in (atomic.check_folder_destination, atomic.check_file_destination):\n"
            "    try:\n"
            f"        check({str(folder / 'm')!r})\n"
            "    except ConfigurationError as error:\n"
            "        print(error)\n")
    finally:
        folder.chmod(0o755)
    lines = completed.stdout.splitlines()
    assert len(lines) == 2, completed.stderr[-2000:]
    for line in lines:
        assert line.startswith(f"{folder}: cannot write there (Permission denied)")
    shutil.rmtree(folder)
