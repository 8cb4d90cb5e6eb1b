"""What both toolkits train with: the distributed epoch loop and early stopping
(:mod:`~delft.training.loop`), replica feeding (:mod:`~delft.training.batching`) and
checkpoints with resume (:mod:`~delft.training.checkpoints`)."""
