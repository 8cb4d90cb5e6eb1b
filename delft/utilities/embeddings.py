"""Static word embeddings from a local text file (word2vec ``.vec`` or GloVe ``.txt``, optionally .gz).

Nothing is downloaded. ``embeddings_name`` is a file path, or a name that
``delft/resources/embeddings.json`` maps to one. Only the vectors of a given vocabulary are kept,
so a 5 GB GloVe file costs the memory of the words a corpus uses.
"""
import gzip
import json
import os

import numpy as np

from delft.utilities.errors import ConfigurationError, DataFormatError

REGISTRY = os.path.join(os.path.dirname(os.path.dirname(__file__)), "resources", "embeddings.json")


def resolve_embeddings(name):
    """The local file behind ``name`` (a path, or a registry name); a clear error when absent."""
    if os.path.isfile(name):
        return name
    with open(REGISTRY, encoding="utf-8") as stream:
        registry = json.load(stream)
    path = registry.get(name)
    if path and os.path.isfile(path):
        return path
    where = f" (registered as {path})" if path else ""
    raise ConfigurationError(f"word embeddings {name!r} not found{where}: give the path of a local "
                             ".vec/.txt file, or map the name in delft/resources/embeddings.json")


def load_word_vectors(path, vocabulary):
    """``{word: vector}`` for the words of ``vocabulary`` found in the text embeddings ``path``.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".vec", delete=False) as f:
    ...     _ = f.write("2 3\\nJune 1 2 3\\nMay 4 5 6\\n")
    >>> sorted(load_word_vectors(f.name, {"May", "April"}))
    ['May']
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    vectors = {}
    dimension = None
    with opener(path, "rt", encoding="utf-8", errors="strict") as stream:
        for line_number, line in enumerate(stream, start=1):
            word, _, values = line.rstrip("\n").partition(" ")
            if line_number == 1 and len(values.split()) == 1:
                continue  # word2vec header: "<count> <dimension>"
            if word not in vocabulary:
                continue
            vector = np.asarray(values.split(), dtype=np.float32)
            if dimension is None:
                dimension = len(vector)
            elif len(vector) != dimension:
                raise DataFormatError(path, line_number,
                                      f"{len(vector)} values where {dimension} are expected")
            vectors[word] = vector
    return vectors
