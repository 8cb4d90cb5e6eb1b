"""Records DeLFT 0.4.6's probabilities for a stand-in of GROBID's second shipped classifier,
``license_gru``, whose weights this project does not hold: its ``config.json`` values (GROBID's
``grobid-home/models/license_gru/config.json``: 10 classes, dense 32, maxlen 300, glove-840B), and
weights drawn from ``np.random.RandomState(k)`` (a stream NumPy keeps fixed) for the k-th weight of
DeLFT 0.4.6's own ``gru`` model, saved by DeLFT 0.4.6 itself (Keras 2 HDF5).

The output, ``delft046_license_gru.json``, holds what the test needs to write the same folder
without DeLFT (the config, and the HDF5's groups, attributes and datasets, each dataset naming
the k of its values) and DeLFT 0.4.6's ``predict(texts, "json")`` on the first 120 texts of the
licence data.

Run in a scratch venv with ``pip install delft==0.4.6``, from a scratch folder::

    python record_delft046_license_gru.py OUT.json GLOVE_STANDIN.vec LICENCES.csv

``GLOVE_STANDIN.vec``: ``grobid-models/reference/synth_vec.py``'s vectors (the glove-840B
stand-in ``test_shipped_copyright_gru_gives_delft_046s_probabilities`` uses too).
"""
import csv
import json
import os
import sys
import tempfile

import h5py
import numpy as np

NAME = "license_gru"
# GROBID's license_gru/config.json (DeLFT 0.3's fields), as GROBID ships it
CONFIG = {
    "model_name": NAME, "architecture": "gru", "embeddings_name": "glove-840B",
    "char_embedding_size": 25, "word_embedding_size": 300, "dropout": 0.5,
    "recurrent_dropout": 0.25, "maxlen": 300, "dense_size": 32, "use_char_feature": False,
    "list_classes": ["CC-0", "CC-BY", "CC-BY-NC", "CC-BY-NC-ND", "CC-BY-SA", "CC-BY-NC-SA",
                     "CC-BY-ND", "copyright", "other", "undecided"],
    "fold_number": 1, "batch_size": 256, "transformer_name": None,
}


def weight_values(k, shape):
    """The k-th weight's values: the same wherever NumPy runs (RandomState's stream is frozen)."""
    return np.random.RandomState(k).uniform(-0.25, 0.25, size=shape).astype(np.float32)


def attribute(value):
    """An HDF5 attribute as JSON: a list of names, an empty list, or a string."""
    if isinstance(value, (bytes, str)):
        return {"kind": "string", "value": value.decode() if isinstance(value, bytes) else value}
    values = [v.decode() if isinstance(v, bytes) else str(v) for v in np.asarray(value).ravel()]
    return {"kind": "names", "value": values}


def structure(path, weights):
    """The groups (with attributes) and datasets of the HDF5 file ``path``; each dataset names
    the k of ``weights`` whose values it holds."""
    groups, datasets = [], []
    with h5py.File(path, "r") as file:
        groups.append({"name": "/", "attrs": {k: attribute(v) for k, v in file.attrs.items()}})

        def visit(name, item):
            if isinstance(item, h5py.Group):
                groups.append({"name": name, "attrs": {k: attribute(v)
                                                       for k, v in item.attrs.items()}})
                return
            values = item[()]
            matches = [k for k, w in enumerate(weights)
                       if w.shape == values.shape and np.array_equal(w, values)]
            assert len(matches) == 1, (name, matches)
            datasets.append({"name": name, "shape": list(values.shape), "k": matches[0]})

        file.visititems(visit)
    return groups, datasets


def main(out, vectors, licences):
    # DeLFT 0.4.6's, imported here: the test imports weight_values from this file
    from delft.textClassification import Classifier
    from delft.textClassification.models import getModel

    registry = os.path.abspath("registry.json")
    with open(registry, "w") as file:
        json.dump({"embedding-lmdb-path": None, "embeddings": [
            {"name": "glove-840B", "path": os.path.abspath(vectors), "type": "glove",
             "format": "vec", "lang": "en", "item": "word"}], "transformers": []}, file)
    texts = [row[0] for row in csv.reader(open(licences, encoding="utf-8"))][:120]
    models = tempfile.mkdtemp()

    model = Classifier(NAME, architecture="gru", embeddings_name="glove-840B",
                       list_classes=CONFIG["list_classes"], maxlen=CONFIG["maxlen"],
                       dropout=CONFIG["dropout"], recurrent_dropout=CONFIG["recurrent_dropout"],
                       batch_size=CONFIG["batch_size"], resource_registry_path=registry)
    model.embeddings = model.get_embedding("glove-840B", use_cache=False)
    model.model_config.word_embedding_size = model.embeddings.embed_size
    model.model = getModel(model.model_config, model.training_config, registry=model.registry)
    weights = [weight_values(k, w.shape) for k, w in enumerate(model.model.model.weights)]
    model.model.model.set_weights(weights)
    model.save(models)
    folder = os.path.join(models, NAME)
    with open(os.path.join(folder, "config.json"), "w") as file:
        json.dump(CONFIG, file, indent=4)  # GROBID's file, not the one DeLFT 0.4.6 writes

    loaded = Classifier(NAME, resource_registry_path=registry)
    loaded.load(dir_path=models)
    result = loaded.predict(texts, "json", use_main_thread_only=True)
    groups, datasets = structure(os.path.join(folder, "model_weights.hdf5"), weights)
    with open(out, "w") as file:
        json.dump({"config": CONFIG, "groups": groups, "datasets": datasets, "texts": texts,
                   "result": result}, file, default=str)
    print("recorded", len(texts), "texts,", len(datasets), "weights ->", out)


if __name__ == "__main__":
    main(*sys.argv[1:4])
