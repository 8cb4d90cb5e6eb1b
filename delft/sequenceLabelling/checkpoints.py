"""Training checkpoints live in :mod:`delft.training.checkpoints`, shared with text
classification; this path keeps working for code written against it."""
from delft.training.checkpoints import (CHECKPOINTS_SUFFIX, CLAIM_FILE,  # noqa: F401
                                        PREEMPTED_EXIT_CODE, PROGRESS_KEY, CheckpointsClaim,
                                        EpochCheckpoints, TrainingProgress, checkpoint_dir,
                                        claimed, remove_checkpoints, run_directly, saved_seed)
