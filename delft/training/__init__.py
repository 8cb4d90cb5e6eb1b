"""What both toolkits train with: the distributed epoch loop and early stopping
(:mod:`~delft.training.loop`, its snapshot of the best weights :mod:`~delft.training.snapshots`),
replica feeding (:mod:`~delft.training.batching`) and checkpoints with resume
(:mod:`~delft.training.checkpoints`)."""
