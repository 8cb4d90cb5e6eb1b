"""The transformer family's model: a keras-hub encoder, each word's first subtoken, a CRF.

BERT, BERT_CRF, BERT_FEATURES, BERT_CRF_FEATURES, BERT_CRF_CHAR, BERT_CRF_CHAR_FEATURES (and the
ChainCRF names) are one model, :class:`TransformerTagger`: subtokens -> encoder -> the vector of
each word's *first* subtoken (gathered with ``word_starts``) [+ char BiLSTM] [+ feature
embeddings] -> dropout -> dense -> CRF or softmax. Potentials are per word, so other subtokens and
the special tokens never reach the loss or the decoding, and every input word gets one label.
A DeLFT 1.x BERT_CRF folder loads with ``crf_over_subtokens``: its CRF decodes every subtoken, as
DeLFT 1.x's does, and a word takes its first subtoken's label.

The head is trained from scratch while the encoder is only adapted: with the encoder at 2e-5, the
dense layer learns ``head_lr_multiplier`` (50) times faster and the CRF transitions
``crf_lr_multiplier`` (500) times (see ScaledDense); the F1 of this recipe on date and
name-citation is in doc/benchmarks.md, "BERT_CRF, all-MiniLM-L6-v2: date and name-citation". The
word-piece embedding table (half of MiniLM's weights) stays frozen by default
(``freeze_word_embeddings``): fine-tuning it costs a dense gradient and two AdamW slots of its
size each step, for the same F1 on date (benchmarks/results/history.md, "BERT_CRF").
"""
import keras
import tensorflow as tf

from delft.sequenceLabelling.layers.char_encoder import CharEncoder
from delft.sequenceLabelling.layers.feature_encoder import FeatureEncoder
from delft.sequenceLabelling.layers.scaled_crf import ScaledChainCRF
from delft.sequenceLabelling.layers.scaled_dense import ScaledDense
from delft.sequenceLabelling.models.base import SequenceLabeller

HEAD_DROPOUT = 0.1


class TransformerTagger(SequenceLabeller):
    """A keras-hub encoder, first-subtoken word vectors [+ chars] [+ features], dense, CRF/softmax.

    ``encoder`` is a keras-hub backbone (see :func:`load_encoder`); ``uses_segments`` says whether
    it takes ``segment_ids`` (BERT). The batch is a :class:`TransformerPreprocessor` batch.

    >>> import numpy as np
    >>> from delft.sequenceLabelling.transformers.encoder import load_encoder
    >>> encoder = load_encoder(tiny_checkpoint("bert"))
    >>> model = TransformerTagger(num_labels=3, encoder=encoder, uses_segments=True)
    >>> ids = np.array([[2, 40, 41, 42, 3]], "int32")
    >>> batch = {"input_ids": ids, "token_type_ids": 0 * ids, "padding_mask": 0 * ids + 1,
    ...          "word_starts": np.array([[1, 3]], "int32"), "lengths": np.array([2], "int32")}
    >>> tuple(model(batch).shape)
    (1, 2, 3)
    """

    def __init__(self, num_labels, encoder, uses_segments=False, use_crf=True, char_vocab_size=0,
                 char_emb_size=25, char_lstm_units=25, feature_vocab_sizes=(),
                 features_embedding_size=4, features_lstm_units=4, features_encoder="concat",
                 dropout=HEAD_DROPOUT,
                 head_lr_multiplier=1.0,
                 crf_lr_multiplier=1.0, crf_over_subtokens=False, **kwargs):
        # the base's CRF is replaced by one whose learning rate follows the head's
        super().__init__(num_labels, use_crf=False, **kwargs)
        self.use_crf = use_crf
        self.crf_over_subtokens = crf_over_subtokens and use_crf
        self.head_lr_multiplier = float(head_lr_multiplier)
        self.crf_lr_multiplier = float(crf_lr_multiplier)
        self.crf = (ScaledChainCRF(num_labels, self.crf_lr_multiplier, name="crf")
                    if use_crf else None)
        self.encoder = encoder
        self.uses_segments = uses_segments
        self.char_vocab_size = char_vocab_size
        self.char_emb_size = char_emb_size
        self.char_lstm_units = char_lstm_units
        self.feature_vocab_sizes = list(feature_vocab_sizes)
        self.features_embedding_size = features_embedding_size
        self.dropout = dropout
        self.char_encoder = (CharEncoder(char_vocab_size, char_emb_size, char_lstm_units,
                                         name="char_encoder") if char_vocab_size else None)
        self.feature_encoder = (FeatureEncoder(self.feature_vocab_sizes, features_embedding_size,
                                               features_lstm_units, features_encoder,
                                               name="feature_encoder")
                                if self.feature_vocab_sizes else None)
        self.head_dropout = keras.layers.Dropout(dropout)
        self.potentials_layer = ScaledDense(num_labels, self.head_lr_multiplier,
                                            name="potentials")

    def subtoken_states(self, batch, training=False):
        """The encoder's last hidden states [batch, subtokens, hidden]."""
        inputs = {"token_ids": batch["input_ids"], "padding_mask": batch["padding_mask"]}
        if self.uses_segments:
            inputs["segment_ids"] = batch["token_type_ids"]
        states = self.encoder(inputs, training=training)
        return states["sequence_output"] if isinstance(states, dict) else states

    def word_potentials(self, batch, training=False):
        states = self.subtoken_states(batch, training=training)
        if self.crf_over_subtokens:  # every subtoken's potentials: see decode
            return self.potentials_layer(self.head_dropout(tf.cast(states, tf.float32),
                                                           training=training))
        parts = [tf.cast(tf.gather(states, batch["word_starts"], batch_dims=1), tf.float32)]
        if self.char_encoder is not None:
            parts.append(tf.cast(self.char_encoder(batch["chars"]), parts[0].dtype))
        if self.feature_encoder is not None:
            parts.append(tf.cast(self.feature_encoder(batch["features"]), parts[0].dtype))
        x = parts[0] if len(parts) == 1 else tf.concat(parts, axis=-1)
        x = self.head_dropout(x, training=training)
        return self.potentials_layer(x)


    # -- DeLFT 1.x's BERT_CRF: the CRF over every subtoken --------------------------------------
    def decode(self, batch, potentials):
        """With ``crf_over_subtokens``, the best path over every subtoken of each row ([CLS],
        continuation subtokens and [SEP] included), read at each word's first subtoken."""
        if not self.crf_over_subtokens:
            return super().decode(batch, potentials)
        tags, _ = self.crf.decode(potentials, tf.reduce_sum(batch["padding_mask"], axis=1))
        scores = tf.gather(tf.nn.softmax(potentials), tags, batch_dims=2)
        return (tf.gather(tags, batch["word_starts"], batch_dims=1),
                tf.gather(scores, batch["word_starts"], batch_dims=1))

    def loss_per_example(self, batch, potentials):
        """With ``crf_over_subtokens``, the CRF's loss over every subtoken, each word's label at
        its first subtoken and label 0 (DeLFT's ``<PAD>``) everywhere else, as DeLFT 1.x
        trains."""
        if not self.crf_over_subtokens:
            return super().loss_per_example(batch, potentials)
        starts = batch["word_starts"]
        rows = tf.broadcast_to(tf.range(tf.shape(starts)[0])[:, tf.newaxis], tf.shape(starts))
        words = tf.sequence_mask(batch["lengths"], tf.shape(starts)[1])
        labels = tf.tensor_scatter_nd_update(
            tf.zeros(tf.shape(batch["input_ids"]), tf.int32),
            tf.stack([tf.boolean_mask(rows, words), tf.boolean_mask(starts, words)], axis=1),
            tf.boolean_mask(batch["labels"], words))
        return self.crf.negative_log_likelihood(potentials, labels,
                                                tf.reduce_sum(batch["padding_mask"], axis=1))


def build_transformer_model(model_config, preprocessor, parts, dropout=None):
    """The model for ``model_config.architecture``; call inside ``strategy.scope()``.

    The checkpoint's weights are read for the first model built from ``preprocessor``; a later
    build (under another strategy, grown for new labels, loaded from a saved model) starts from
    the config alone and gets its weights from its caller, so the checkpoint directory is not
    needed any more. ``dropout`` (default: the checkpoint's own, and 0.1 before the head) sets
    both the encoder's and the head's.
    """
    from delft.sequenceLabelling.transformers.encoder import ENCODERS, load_encoder

    config = preprocessor.encoder_config
    encoder = load_encoder(preprocessor.transformer_dir, config,
                           load_weights=preprocessor.load_encoder_weights, dropout=dropout,
                           dtype=model_config.compute_dtype,
                           freeze_word_embeddings=model_config.freeze_word_embeddings)
    preprocessor.load_encoder_weights = False
    return TransformerTagger(
        num_labels=preprocessor.num_labels, encoder=encoder,
        uses_segments=ENCODERS[config["model_type"]].uses_segments, use_crf=parts.crf,
        char_vocab_size=preprocessor.char_vocab_size if parts.chars else 0,
        char_emb_size=model_config.char_emb_size, char_lstm_units=model_config.char_lstm_units,
        feature_vocab_sizes=preprocessor.feature_vocab_sizes if parts.features else (),
        features_embedding_size=model_config.features_embedding_size,
        features_lstm_units=model_config.features_lstm_units,
        features_encoder=model_config.features_encoder,
        dropout=HEAD_DROPOUT if dropout is None else dropout,
        head_lr_multiplier=model_config.head_lr_multiplier,
        crf_lr_multiplier=model_config.crf_lr_multiplier,
        crf_over_subtokens=model_config.crf_over_subtokens, name=model_config.architecture)
