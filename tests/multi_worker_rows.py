"""One worker of a loopback cluster: which training rows its replicas took, for test_multi_worker.

    python tests/multi_worker_rows.py OUT.json   (with TF_CONFIG or SLURM variables naming the cluster)

Trains one epoch of BidLSTM_CRF on 101 date sequences at global batch 10 without a seed (the
workers must agree on one), recording the row index and weight of every slice this worker padded,
then tags 40 sequences across the workers; writes what it saw to OUT.json.
"""
import json
import sys

import delft  # noqa: F401
from delft.sequenceLabelling import Sequence
from delft.sequenceLabelling.batching import ReplicaFeeder
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
from delft.utilities import devices
from conftest import SAMPLE_DATE

ROWS, BATCH = 101, 10


def main(out_path):
    strategy = devices.get_strategy(True)
    x, y, _ = load_data_and_labels_crf_file(str(SAMPLE_DATE))
    x, y = list(x[:ROWS]), list(y[:ROWS])
    trained, seeds = [], []
    original_slices, original_seed = ReplicaFeeder.slices, devices.common_seed

    def recording_slices(self, corpus, rows, label_ids=None):
        parts = original_slices(self, corpus, rows, label_ids)
        if label_ids is not None:
            trained.extend([int(i), float(w)] for part in parts
                           for i, w in zip(part["index"], part["weights"]))
        return parts

    def recording_seed(strategy, seed):
        seeds.append(original_seed(strategy, seed))
        return seeds[-1]

    ReplicaFeeder.slices, devices.common_seed = recording_slices, recording_seed
    model = Sequence("date-BidLSTM_CRF", max_epoch=1, batch_size=BATCH, dropout=0.0,
                     recurrent_dropout=0.0)
    model.train(x, y, multi_gpu=True)
    labels = model.tag(x[:40], None, multi_gpu=True)
    feeder = ReplicaFeeder(strategy, model.p)
    with open(out_path, "w") as out:
        json.dump({"resolver": type(devices.cluster_resolver()).__name__,
                   "chief": devices.is_chief(strategy), "workers": devices.worker_count(strategy),
                   "replicas": strategy.num_replicas_in_sync,
                   "local_replicas": feeder.local_replicas, "seeds": seeds, "rows": ROWS,
                   "trained": trained, "labels": labels}, out)
    devices.wait_for_workers(strategy)


if __name__ == "__main__":
    main(sys.argv[1])
