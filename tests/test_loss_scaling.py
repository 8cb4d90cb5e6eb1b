"""mixed_float16 training: Keras' dynamic LossScaleOptimizer, kept in the epoch checkpoints."""
import logging

import numpy as np

from test_transformer import date_like
from tiny_transformers import write_tiny_checkpoint


def test_float16_model_trains_with_dynamic_loss_scaling_and_resumes(tmp_path, caplog):
    import keras

    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.trainer import Trainer

    path = write_tiny_checkpoint("bert", str(tmp_path / "bert"))
    x, y, _ = date_like(40)
    used = []
    original = Trainer.build_optimizer

    def recording(self, steps):
        original(self, steps)
        used.append(self.optimizer)

    Trainer.build_optimizer = recording
    try:
        checkpoints = str(tmp_path / "tiny.checkpoints")
        for epochs in (2, 3):  # the second run resumes after epoch 2
            model = Sequence("tiny", architecture="BERT_CRF", transformer_name=path,
                             compute_dtype="mixed_float16", max_epoch=epochs, batch_size=10,
                             seed=1, learning_rate=1e-3, early_stop=False,
                             checkpoint_interval=0)
            with caplog.at_level(logging.INFO):
                model.train(x, y, x_valid=x[:10], y_valid=y[:10], checkpoint_dir=checkpoints)
    finally:
        Trainer.build_optimizer = original
    assert all(isinstance(o, keras.optimizers.LossScaleOptimizer) for o in used)
    # the optimizer's state came back from the checkpoint: 4 more steps than after 2 epochs
    assert int(used[1].iterations.numpy()) == int(used[0].iterations.numpy()) + 4
    assert 0 < float(used[1].dynamic_scale.numpy()) <= 2 ** 15
    assert "2 epoch(s) done, going on with epoch 3" in caplog.text
    assert [r["epoch"] for r in model.history] == [1, 2, 3]
    assert all(np.isfinite(r["loss"]) for r in model.history)
    assert all(np.isfinite(w).all() for w in model.model.get_weights())
