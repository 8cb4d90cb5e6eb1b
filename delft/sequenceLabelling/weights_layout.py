"""Does a weights file belong to the model config.json describes? Checked before loading it.

Keras loads a ``.weights.h5`` file by attribute path and silently skips the file's layers the model
lacks: a config naming BidLSTM over BidLSTM_CRF weights loads, drops the CRF and mislabels. Here
each layer's own variables (the shapes ``save_own_variables`` gives, as Keras writes them) are
compared with the file's groups, read with h5py without loading any value; any layer on one side
only is a one-line :class:`ModelLoadError` naming it.
"""
import collections

import h5py

from delft.utilities.errors import ModelLoadError

VARIABLES_GROUP = "vars"


def model_layers(model):
    """``[(layer name, ((variable key, shape), ...))]`` of every layer of ``model`` holding
    variables, as ``model.save_weights`` writes them."""
    layers = []
    for layer in model._flatten_layers(include_self=True):
        store = {}
        layer.save_own_variables(store)
        if store:
            layers.append((layer.name, tuple((key, tuple(store[key].shape))
                                             for key in sorted(store))))
    return layers


def file_layers(path):
    """The same list for a ``.weights.h5`` file: each group holding variables, by its layer name."""
    layers = []

    def visit(name, item):
        if isinstance(item, h5py.Group) and name.split("/")[-1] == VARIABLES_GROUP and len(item):
            shapes = tuple((key, tuple(item[key].shape)) for key in sorted(item)
                           if isinstance(item[key], h5py.Dataset))
            if shapes:
                layers.append((str(item.attrs.get("name", name)), shapes))

    with h5py.File(path, "r") as weights:
        weights.visititems(visit)
    return layers


def check_weights_match(model, path, architecture):
    """Raise a one-line :class:`ModelLoadError` when the layers of ``path`` are not those of
    ``model`` (built as ``architecture``): a layer, or a variable shape, on one side only.

    A file h5py cannot read is left to the load that follows, which reports it.
    """
    try:
        found = file_layers(path)
    except Exception:  # h5py raises many types for a damaged file
        return
    expected = model_layers(model)
    missing = collections.Counter(s for _, s in expected) - collections.Counter(s for _, s in found)
    extra = collections.Counter(s for _, s in found) - collections.Counter(s for _, s in expected)
    if not missing and not extra:
        return
    parts = []
    if extra:
        parts.append("the file has " + _describe(found, extra) + f" that a {architecture} "
                     "model has not")
    if missing:
        parts.append(f"the {architecture} model has " + _describe(expected, missing) +
                     " that the file has not")
    raise ModelLoadError(f"{path}: these weights are not those of the model config.json "
                         f"describes ({'; '.join(parts)})")


def _describe(layers, wanted):
    """``layer 'crf' (4x4, 4, 4), ...`` for the layers whose signatures are in ``wanted``."""
    left = collections.Counter(wanted)
    names = []
    for name, signature in layers:
        if left[signature]:
            left[signature] -= 1
            shapes = ", ".join("x".join(map(str, shape)) or "scalar" for _, shape in signature)
            names.append(f"layer '{name}' ({shapes})")
    return ", ".join(names)
