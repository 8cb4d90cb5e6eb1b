"""Record DeLFT 0.4.6's emissions (the potentials its CRF reads, before the start and end energies)
on the first batch of each shipped GROBID folder, as tests/test_foreign_delft0.py compares them.

Run with a DeLFT 0.4.6 venv (``pip install delft==0.4.6``; never a dependency of this project),
from a folder outside this repository (its package is also called ``delft``), with Keras 2
(tf_keras) as TensorFlow Addons needs:

    TF_USE_LEGACY_KERAS=1 python record_emissions.py MODELS_DIR INPUTS_DIR REGISTRY.json OUT_DIR

MODELS_DIR is ../shared/data/grobid-models, INPUTS_DIR its reference/inputs, REGISTRY.json a
DeLFT registry naming the sample's glove-840B stand-in (reference/synth_vec.py). Writes
OUT_DIR/<folder>.npz: ``emissions`` [rows, width, labels] of the first ``rows`` sequences of the
first batch (all of it up to 4 rows), ``lengths`` their lengths, ``batch_rows`` the size of that
batch (DeLFT's ``batch_size``; its width is that of its longest sequence).
"""
import json
import os
import sys

import numpy as np
import tf_keras

from delft.sequenceLabelling import Sequence

KEPT_ROWS = 4

models_dir, inputs_dir, registry, out_dir = sys.argv[1:5]
os.makedirs(out_dir, exist_ok=True)
for folder in sorted(os.listdir(models_dir)):
    if not os.path.isfile(os.path.join(models_dir, folder, "preprocessor.json")):
        continue
    data = json.load(open(os.path.join(inputs_dir, folder + ".json"), encoding="utf-8"))
    model = Sequence(folder, resource_registry_path=registry)
    model.load(dir_path=models_dir)
    config = model.model_config
    generator = model.model.get_generator()(
        data["x"], None, batch_size=config.batch_size, preprocessor=model.p,
        char_embed_size=config.char_embedding_size, max_sequence_length=config.max_sequence_length,
        embeddings=model.embeddings, tokenize=False, shuffle=False, features=data["f"],
        output_input_offsets=True, use_chain_crf=config.use_chain_crf)
    inputs = generator[0][0]
    keras_model = model.model.model
    if config.use_chain_crf:  # a functional model ending Dense -> ChainCRF
        dense = [layer for layer in keras_model.layers
                 if isinstance(layer, tf_keras.layers.Dense)][-1]
        emissions = tf_keras.Model(keras_model.inputs, dense.output).predict_on_batch(inputs)
    else:  # TensorFlow Addons' CRF wrapper: the CRF's own dense layer over the base model
        emissions = keras_model.crf_layer._dense_layer(keras_model.base_model(inputs)).numpy()
    rows = min(KEPT_ROWS, len(emissions))
    lengths = [len(seq) for seq in data["x"][:rows]]
    np.savez_compressed(os.path.join(out_dir, folder + ".npz"),
                        emissions=np.asarray(emissions[:rows], dtype=np.float32),
                        lengths=np.asarray(lengths), batch_rows=len(emissions))
    print(folder, emissions.shape, flush=True)
