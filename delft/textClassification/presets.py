"""The defaults of each classification application's models, as data (DeLFT 1.2.0's apps'
``configure``): what licenseClassifier.py and citationClassifier.py apply, resolved as the
tagger's presets are — the option given, else the model's preset, else the field's default.

>>> preset("citation", "citations", "rnn")["maxlen"], preset("license", "license", "transformer")["max_epoch"]
(150, 6)
>>> rnn, bert = (preset("citation", "citations", f)["class_weights"] for f in ("rnn", "transformer"))
>>> {c: w ** 0.5 for c, w in rnn.items()} == bert
True
"""
from typing import Dict

from delft.textClassification.reader import CITATION_CLASSES, COPYRIGHT_CLASSES, LICENSE_CLASSES

# application -> model -> family -> config field values ("" is every model of the application)
MODEL_PRESETS: Dict[str, Dict[str, Dict[str, dict]]] = {
    "license": {
        "": {"rnn": dict(batch_size=256, maxlen=300, max_epoch=60, patience=5),
             "transformer": dict(batch_size=16, maxlen=200, max_epoch=6, early_stop=False)},
        "copyright": {family: dict(list_classes=COPYRIGHT_CLASSES)
                      for family in ("rnn", "transformer")},
        "license": {family: dict(list_classes=LICENSE_CLASSES)
                    for family in ("rnn", "transformer")},
    },
    "citation": {
        "": {"rnn": dict(batch_size=256, maxlen=150, max_epoch=60, patience=5,
                         list_classes=CITATION_CLASSES, class_weights={0: 25.0, 1: 1.0, 2: 9.0}),
             # bert: the square roots of the RNNs' weights (doc/classification.md, "Choices")
             "transformer": dict(batch_size=32, maxlen=150, max_epoch=3, early_stop=False,
                                 list_classes=CITATION_CLASSES,
                                 class_weights={0: 5.0, 1: 1.0, 2: 3.0})},
    },
}

# what an architecture takes whatever the application, for settings not given
ARCHITECTURE_PRESETS = {"bidLstm_simple": dict(recurrent_units=300)}


def preset(application: str, model: str, family: str) -> dict:
    """The config field values ``application`` gives ``model`` for the architecture ``family``
    (``"rnn"`` — every architecture but bert — or ``"transformer"``)."""
    if application not in MODEL_PRESETS:
        raise ValueError(f"no presets for {application!r}: {', '.join(MODEL_PRESETS)}")
    table = MODEL_PRESETS[application]
    values = dict(table[""].get(family, {}))
    values.update(table.get(model, {}).get(family, {}))
    return values
