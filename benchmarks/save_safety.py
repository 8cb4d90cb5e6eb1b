"""Sequence.save under readers and kills: the figures of doc/reliability.md.

    python benchmarks/save_safety.py [--saves 100] [--kills 50] [--fork] [--models-dir DIR] [--json]

1. Gap watch: a thread reads the model folder as Sequence.load does (read again when a save
   replaced it while it was read) while the main thread saves --saves times, once with this
   version's save (one RENAME_EXCHANGE) and once with the two renames of the branch point's
   design (also this version's fallback where a file system cannot exchange): how many saves left
   the reader a missing or incomplete folder.
2. Kill loop: --kills times, a child process loads the model and saves it in a loop; it is
   SIGKILLed at a random moment (uniform over three durations of its first save, after it). After
   each kill the target folder is loaded (Sequence.load) and tags a date; staging folders the
   kill left are counted. A last save must remove them all. The child is a fresh interpreter
   (it imports TensorFlow and loads the model before each kill), or with --fork a fork of this
   process, model loaded (the same save code, killed alike, without that start-up; TensorFlow
   does not support fork, so a child that hangs is reported as such).

Without --models-dir a date model is trained first (2 epochs, the shipped sample).
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import delft  # noqa: E402,F401
from delft.sequenceLabelling import Sequence  # noqa: E402
from delft.sequenceLabelling.model_dir import (PREPROCESSOR_FILE, WEIGHTS_FILE,  # noqa: E402
                                               read_model_config)
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file  # noqa: E402
from delft.training.saved_models import folder_identity, pinned_folder  # noqa: E402
from delft.utilities import atomic  # noqa: E402
from delft.utilities.data_path import REPO_ROOT  # noqa: E402

MODEL_NAME = "date-BidLSTM_CRF"
SAMPLE = REPO_ROOT / "data" / "sequenceLabelling" / "grobid" / "date" / "date-sample.train"
CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from delft.sequenceLabelling import Sequence
model = Sequence({name!r})
model.load({source!r})
model.history = json.load(open({history!r}))  # so that each save also draws the curve
saves = 0
while True:
    print("begin", saves, flush=True)
    model.save({target!r})
    print("end", saves, flush=True)
    saves += 1
"""


def trained_models_dir(scratch):
    x, y, _ = load_data_and_labels_crf_file(SAMPLE)
    model = Sequence(MODEL_NAME, max_epoch=2, batch_size=60, recurrent_dropout=0.0, seed=1)
    model.train(x, y)
    model.save(scratch)
    return scratch


def complete(path):
    """True when ``path`` reads as a complete model folder (config checked, every file there)."""
    import h5py

    read_model_config(path)
    with open(os.path.join(path, PREPROCESSOR_FILE), encoding="utf-8") as stream:
        json.load(stream)
    with h5py.File(os.path.join(path, WEIGHTS_FILE), "r"):
        return True


def gap_watch(model, folder, saves):
    """Saves during which a reader found the target missing or incomplete."""
    target = os.path.join(folder, MODEL_NAME)
    model.save(folder)
    current, gapped, reads, stop = [0], set(), [0], threading.Event()

    def watch():
        while not stop.is_set():
            with pinned_folder(target) as before:
                try:
                    complete(target)
                    reads[0] += 1
                except Exception:  # missing or half-read: a gap unless swapped meanwhile
                    if before is None or folder_identity(target) == before:
                        gapped.add(current[0])

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    start = time.perf_counter()
    for number in range(1, saves + 1):
        current[0] = number
        model.save(folder)
    seconds = time.perf_counter() - start
    stop.set()
    watcher.join()
    return {"saves": saves, "saves_with_a_gap": len(gapped), "reads": reads[0],
            "seconds_per_save": round(seconds / saves, 4)}


def spawned_saver(source, target_dir, history, scratch):
    """A fresh interpreter loading the model from ``source`` and saving it in a loop: its pid,
    and its stdout (``begin k`` / ``end k`` lines)."""
    script = os.path.join(scratch, "child.py")
    with open(script, "w") as out:
        out.write(CHILD.format(root=str(REPO_ROOT), name=MODEL_NAME, source=source,
                               history=history, target=target_dir))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    child = subprocess.Popen([sys.executable, script], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env)
    return child.pid, child.stdout


def forked_saver(model, target_dir, history_path):
    """A fork of this process saving ``model`` in a loop: its pid, and the same lines."""
    with open(history_path) as stream:
        history = json.load(stream)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            model.history = history
            for saves in range(10 ** 6):
                os.write(write_end, f"begin {saves}\n".encode())
                model.save(target_dir)
                os.write(write_end, f"end {saves}\n".encode())
        finally:
            os._exit(1)
    os.close(write_end)
    return pid, os.fdopen(read_end)


def kill_once(pid, stream, fraction):
    """Kill the saving child ``pid`` ``fraction`` x 3 durations of its first save after that
    save ended: when the kill landed."""
    lines, first_save = [], threading.Event()

    def read():
        for line in stream:
            lines.append((time.perf_counter(), *line.split()))
            if line.startswith("end"):
                first_save.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not first_save.wait(300):
        os.kill(pid, signal.SIGKILL)
        raise RuntimeError("the child saving the model never ended its first save (hung)")
    delay = fraction * 3 * (lines[1][0] - lines[0][0])
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    reader.join()
    stream.close()
    return {"delay_s": round(delay, 3), "saves_ended": sum(w[1] == "end" for w in lines),
            "inside_a_save": lines[-1][1] == "begin"}


def kill_loop(models_dir, kills, scratch, fork_from=None, seed=0):
    """``kills`` savers killed at random moments; ``fork_from``: a loaded model to fork with."""
    rng = random.Random(seed)
    source = os.path.join(models_dir, MODEL_NAME)
    target_dir = os.path.join(scratch, "target")
    shutil.copytree(source, os.path.join(target_dir, MODEL_NAME))
    history = os.path.join(scratch, "history.json")
    with open(history, "w") as out:
        json.dump([{"epoch": 1, "loss": 1.0, "val_f1": 0.5, "lr": 1e-3, "seconds": 1.0}], out)
    pattern = atomic.staging_pattern(MODEL_NAME)
    results, loadable, leftovers = [], 0, 0
    for _ in range(kills):
        if fork_from is not None:
            pid, stream = forked_saver(fork_from, target_dir, history)
        else:
            pid, stream = spawned_saver(models_dir, target_dir, history, scratch)
        outcome = kill_once(pid, stream, rng.random())
        left = [e for e in os.listdir(target_dir) if pattern.match(e)]
        model = Sequence(MODEL_NAME)
        model.load(target_dir)
        tagged = model.tag([["12", "June", "2005"]], None)
        loadable += len(tagged[0]) == 3
        leftovers += len(left)
        results.append(dict(outcome, staging_left=len(left)))
    last = Sequence(MODEL_NAME)
    last.load(target_dir)
    last.save(target_dir)
    remaining = sorted(os.listdir(target_dir))
    return {"kills": kills, "child": "fork" if fork_from is not None else "fresh interpreter",
            "inside_a_save": sum(r["inside_a_save"] for r in results),
            "loadable_after_kill": loadable, "kills_that_left_a_staging_folder":
            sum(r["staging_left"] > 0 for r in results), "staging_folders_seen": leftovers,
            "after_the_next_save": remaining, "runs": results}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=100)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--models-dir", default=None, help=f"holds {MODEL_NAME}/")
    parser.add_argument("--fork", action="store_true",
                        help="fork this process for each saver instead of starting one")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        models_dir = args.models_dir or trained_models_dir(os.path.join(scratch, "trained"))
        model = Sequence(MODEL_NAME)
        model.load(models_dir)
        exchange = gap_watch(model, os.path.join(scratch, "exchange"), args.saves)
        original = atomic.exchange
        atomic.exchange = lambda first, second: False  # the two renames of the branch point
        try:
            renames = gap_watch(model, os.path.join(scratch, "renames"), args.saves)
        finally:
            atomic.exchange = original
        kills = kill_loop(models_dir, args.kills, scratch, model if args.fork else None) \
            if args.kills else None
    result = {"gap_watch": {"exchange": exchange, "two_renames": renames}, "kill_loop": kills}
    if args.json:
        print(json.dumps(result))
        return
    for name, watch in result["gap_watch"].items():
        print(f"{name:12s}: {watch['saves_with_a_gap']:4d} of {watch['saves']} saves left a reader "
              f"a missing or incomplete folder ({watch['reads']} complete reads, "
              f"{watch['seconds_per_save']:.3f} s per save)")
    if kills:
        print(f"kill loop ({kills['child']}): {kills['kills']} SIGKILLs, "
              f"{kills['inside_a_save']} inside a save; "
              f"target loadable (and tagging) after {kills['loadable_after_kill']} of them; "
              f"{kills['kills_that_left_a_staging_folder']} kills left a staging folder "
              f"({kills['staging_folders_seen']} seen in all); after the next save: "
              f"{kills['after_the_next_save']}")


if __name__ == "__main__":
    main()
