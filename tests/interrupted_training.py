"""Run a CLI training (``grobidTagger.main``) and end it with a signal at a chosen step.

    python tests/interrupted_training.py SIGNAL:EPOCH:STEP|none TIMING_FILE -- grobidTagger args...

The signal (SIGKILL or SIGTERM) is sent to this very process just before step STEP (counted from
0) of epoch EPOCH, so the interruption falls at the same point on every run. TIMING_FILE receives
``{"first_step": seconds from process start to the first training step}`` (or "-" for none).
Used by tests/test_checkpoints.py and benchmarks/checkpoint_overhead.py.
"""
import json
import os
import signal
import sys
import time

STARTED = time.time()


def main(argv=None):
    spec, timing_file, separator, *argv = argv or sys.argv[1:]
    assert separator == "--", __doc__
    import delft  # noqa: F401  (logical devices before TensorFlow starts)
    from delft.applications import grobidTagger
    from delft.sequenceLabelling.trainer import Trainer

    kill = None
    if spec != "none":
        name, epoch, step = spec.split(":")
        kill = (getattr(signal, name), int(epoch), int(step))
    original = Trainer._run_epoch
    first_step = []

    def run_epoch(self, corpus, label_ids, progress, epoch, steps, run_step):
        def step(function, *args):
            if not first_step:
                first_step.append(time.time() - STARTED)
                if timing_file != "-":
                    with open(timing_file, "w") as out:
                        json.dump({"first_step": first_step[0]}, out)
            if kill and (epoch, progress.steps_done) == kill[1:]:
                os.kill(os.getpid(), kill[0])
            return run_step(function, *args)

        return original(self, corpus, label_ids, progress, epoch, steps, step)

    Trainer._run_epoch = run_epoch
    return grobidTagger.main(argv)


if __name__ == "__main__":
    from delft.applications.common import command_for

    command_for(main)()  # ends as the CLI command does (no interpreter teardown)
