"""DeLFT's BidGRU_CRF: the BiLSTM family's word vectors through two stacked BiGRUs, then the CRF."""
from delft.sequenceLabelling.layers.bigru import BiGRU
from delft.sequenceLabelling.models.bilstm import BidLSTM, rnn_options


class BidGRU(BidLSTM):
    """:class:`~delft.sequenceLabelling.models.bilstm.BidLSTM` whose word encoder is two
    bidirectional GRUs of ``word_lstm_units`` each, with a dropout between them and none after
    the second (DeLFT's stack), then the dense layer and the CRF.

    >>> import numpy as np
    >>> model = BidGRU(num_labels=3, char_vocab_size=10, word_lstm_units=4)
    >>> batch = {"chars": np.ones((2, 4, 3), "int32"), "lengths": np.array([4, 2], "int32")}
    >>> tuple(model(batch).shape)
    (2, 4, 3)
    """

    def make_word_encoder(self):
        self.word_gru = BiGRU(self.word_lstm_units, recurrent_dropout=self.recurrent_dropout,
                              name="word_gru")
        self.word_gru_2 = BiGRU(self.word_lstm_units, recurrent_dropout=self.recurrent_dropout,
                                name="word_gru_2")

    def encode_words(self, x, lengths, training=False):
        x = self.word_gru(x, lengths, training=training)
        x = self.output_dropout(x, training=training)
        return self.word_gru_2(x, lengths, training=training)  # no dropout after it: DeLFT's


def build_bigru(model_config, preprocessor, parts):
    """The BiGRU model of ``model_config``; ``parts`` says its CRF, chars, casing, features."""
    return BidGRU(**rnn_options(model_config, preprocessor, parts))
