"""Configuration objects: what a model is (saved as config.json) and how it is trained.

Every CLI option maps straight to one field here, as in HF's run_ner.py.
"""
import dataclasses
import json
from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class ModelConfig:
    """Everything needed to rebuild a trained model; written to ``config.json`` beside its weights."""

    model_name: str = "model"
    architecture: str = "BidLSTM_CRF"
    embeddings_name: Optional[str] = None
    word_embedding_size: int = 0
    char_emb_size: int = 25
    max_char_length: int = 30
    char_lstm_units: int = 25
    word_lstm_units: int = 100
    max_sequence_length: int = 300
    dropout: float = 0.5
    recurrent_dropout: float = 0.25
    batch_size: int = 20
    features_indices: Optional[List[int]] = None
    features_embedding_size: int = 4
    features_lstm_units: int = 4
    transformer_name: Optional[str] = None
    window_stride: Optional[int] = None
    delft_version: str = ""

    def save(self, path):
        with open(path, "w", encoding="utf-8") as out:
            json.dump(dataclasses.asdict(self), out, indent=2, sort_keys=True)

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as stream:
            values = json.load(stream)
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass
class TrainingConfig:
    """How a model is trained; not needed to tag, so not saved with the model."""

    batch_size: int = 20
    optimizer: str = "adam"
    learning_rate: Optional[float] = None
    lr_decay: float = 0.9
    lr_schedule: str = "plateau"
    clip_gradients: float = 5.0
    max_epoch: int = 50
    early_stop: bool = True
    patience: int = 5
    fold_number: int = 1
    seed: Optional[int] = None
    multi_gpu: bool = False
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    plot_path: Optional[str] = None
    extra: dict = field(default_factory=dict)

    def resolved_learning_rate(self, uses_transformer):
        if self.learning_rate is not None:
            return self.learning_rate
        return 2e-5 if uses_transformer else 1e-3
