"""
Trains small DeLFT 1.2.0 (PyTorch) sequence labelling models on GROBID's date data and
records what DeLFT 1.2.0 itself labels with them, for a reader of these model folders to
be checked against. See README.md beside this file.

Run it with the Python of a virtual environment that has DeLFT 1.2.0 installed, from a
folder OUTSIDE this repository (this repository's package is also called ``delft``)::

    /work/venvs/delft12/bin/python /path/to/tests/data/delft1/record_delft12.py OUT_DIR \
        [--work-dir DIR] [--data FILE] [--only NAME[,NAME...]]

OUT_DIR receives, for every model NAME of SPECS below, the folder OUT_DIR/NAME/ that
``Sequence.save`` writes and OUT_DIR/reference/NAME.json with DeLFT's labels, plus the
inputs the models were made from: OUT_DIR/tiny-vectors.vec (word vectors) and
OUT_DIR/tiny-bert/ (a tiny randomly initialised BERT). DeLFT writes its own scratch files
(LMDB of the word vectors, training checkpoints) under --work-dir, which the script enters.

Every model is trained in a process of its own, and then loaded and run in another fresh
process, as a user of a saved model would.
"""

import argparse
import collections
import importlib.metadata
import json
import os
import random
import shutil
import subprocess
import sys
import zlib

DEFAULT_DATA = "/work/shared/data/sequenceLabelling/grobid/date/date-220311.train"
DEFAULT_WORK_DIR = "/work/venvs/delft12-work"

EMBEDDINGS_NAME = "tiny-date-16d"
EMBEDDINGS_SIZE = 16
VECTORS_FILE = "tiny-vectors.vec"
TINY_BERT_DIR = "tiny-bert"

NB_REFERENCE = 150  # the last sequences of the file: labelled, never trained on
NB_VALID = 60  # the sequences before them: the validation set of the training
NB_EMISSIONS = 5  # the sequences whose emission scores are recorded too

RNN_COMMON = dict(
    char_emb_size=10,
    char_lstm_units=10,
    word_lstm_units=20,
    max_sequence_length=30,
    batch_size=20,
    max_epoch=8,
    patience=5,
)
BERT_COMMON = dict(
    word_lstm_units=20,
    max_sequence_length=32,
    batch_size=20,
    max_epoch=8,
    patience=5,
    learning_rate=2e-3,
)

# name of the folder -> arguments of Sequence(...); "features": whether the model is given
# the feature columns of the data
SPECS = {
    "date-BidLSTM_CRF": dict(architecture="BidLSTM_CRF", embeddings_name=EMBEDDINGS_NAME, **RNN_COMMON),
    "date-BidLSTM_CRF-charonly": dict(architecture="BidLSTM_CRF", embeddings_name=None, **RNN_COMMON),
    "date-BidLSTM_CRF_FEATURES": dict(
        architecture="BidLSTM_CRF_FEATURES", embeddings_name=EMBEDDINGS_NAME, features=True, **RNN_COMMON
    ),
    "date-BidGRU_CRF": dict(architecture="BidGRU_CRF", embeddings_name=None, **RNN_COMMON),
    "date-BidLSTM_ChainCRF": dict(architecture="BidLSTM_ChainCRF", embeddings_name=EMBEDDINGS_NAME, **RNN_COMMON),
    "date-BidLSTM_ChainCRF_FEATURES": dict(
        architecture="BidLSTM_ChainCRF_FEATURES",
        embeddings_name=None,
        features=True,
        # explicit columns, as GROBID gives for some of its models, and not all of those
        # the automatic choice of date-BidLSTM_CRF_FEATURES takes (9 to 15)
        features_indices=[9, 11, 12, 15],
        **RNN_COMMON,
    ),
    "date-BidLSTM": dict(architecture="BidLSTM", embeddings_name=None, **RNN_COMMON),
    "date-BidLSTM_CNN": dict(architecture="BidLSTM_CNN", embeddings_name=EMBEDDINGS_NAME, **RNN_COMMON),
    "date-BidLSTM_CNN_CRF": dict(architecture="BidLSTM_CNN_CRF", embeddings_name=None, **RNN_COMMON),
    "date-BidLSTM_CRF_CASING": dict(
        architecture="BidLSTM_CRF_CASING", embeddings_name=EMBEDDINGS_NAME, **RNN_COMMON
    ),
    "date-BERT_CRF": dict(architecture="BERT_CRF", transformer_name=TINY_BERT_DIR, **BERT_COMMON),
    "date-BERT": dict(architecture="BERT", transformer_name=TINY_BERT_DIR, **BERT_COMMON),
    "date-BERT_ChainCRF": dict(architecture="BERT_ChainCRF", transformer_name=TINY_BERT_DIR, **BERT_COMMON),
    "date-BERT_CRF_FEATURES": dict(
        architecture="BERT_CRF_FEATURES", transformer_name=TINY_BERT_DIR, features=True, **BERT_COMMON
    ),
    "date-BERT_FEATURES": dict(
        architecture="BERT_FEATURES", transformer_name=TINY_BERT_DIR, features=True, **BERT_COMMON
    ),
    "date-BERT_ChainCRF_FEATURES": dict(
        architecture="BERT_ChainCRF_FEATURES", transformer_name=TINY_BERT_DIR, features=True, **BERT_COMMON
    ),
}


# ----------------------------------------------------------------------------------------
# environment


def check_delft():
    """Fails unless ``import delft`` is DeLFT 1.2.0 from an installed distribution."""
    import delft

    version = importlib.metadata.version("delft")
    location = os.path.realpath(delft.__file__)
    here = os.path.realpath(os.path.dirname(__file__))
    if version != "1.2.0" or "site-packages" not in location or location.startswith(here.split("/tests/")[0] + "/"):
        sys.exit(f"import delft gives {location} (distribution version {version}): run from a folder outside "
                 "the repository with the Python of a virtual environment where DeLFT 1.2.0 is installed")
    return location


def versions():
    return {name: importlib.metadata.version(name)
            for name in ("delft", "torch", "transformers", "pytorch-crf", "safetensors", "numpy", "tokenizers")}


def seed_everything(seed=0):
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def register_resources(out_dir, work_dir):
    """
    Adds the tiny word vectors to the resource registry every ``Sequence`` reads
    (``delft/resources-registry.json`` of the installed package), as an entry of its
    "embeddings", the way a user declares their own vectors. The LMDB database DeLFT
    compiles them into goes to the work directory.
    """
    import delft.sequenceLabelling.wrapper as wrapper

    original = wrapper.load_resource_registry

    def load_resource_registry(path):
        registry = original(path)
        registry["embedding-lmdb-path"] = os.path.join(work_dir, "data", "db")
        registry["embeddings"] = [e for e in registry["embeddings"] if e["name"] != EMBEDDINGS_NAME] + [
            {
                "name": EMBEDDINGS_NAME,
                "path": os.path.join(out_dir, VECTORS_FILE),
                "type": "fasttext",
                "format": "vec",
                "lang": "en",
                "item": "word",
                "url": "",
            }
        ]
        return registry

    wrapper.load_resource_registry = load_resource_registry


# ----------------------------------------------------------------------------------------
# data


def load_splits(data_file):
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file

    x, y, f = load_data_and_labels_crf_file(data_file)
    x = [list(s) for s in x]
    y = [list(s) for s in y]
    f = [[list(row) for row in s] for s in f]
    n = len(x)
    test = slice(n - NB_REFERENCE, n)
    valid = slice(n - NB_REFERENCE - NB_VALID, n - NB_REFERENCE)
    train = slice(0, n - NB_REFERENCE - NB_VALID)
    return {name: (x[s], y[s], f[s]) for name, s in (("train", train), ("valid", valid), ("test", test))}


def reference_inputs(splits):
    """
    The sequences labelled for the reference: the last NB_REFERENCE of the file, then a
    few made up to reach the corners of the input (see README.md, "reference files").
    """
    x, _, f = splits["test"]
    x, f = [list(s) for s in x], [list(s) for s in f]
    nb_data = len(x)

    # a sequence of 4 tokens of the data, whose feature rows the made-up ones borrow
    four = next(i for i, s in enumerate(x) if len(s) == 4)
    # characters never seen in training, and a word with no vector
    x.append(["Ωμέγα", "12", "Juin", "2021"])
    f.append(f[four])
    # a token longer than max_char_length (30)
    x.append(["Supercalifragilisticexpialidocious-and-more", "3", "March", "1999"])
    f.append(f[four])
    # longer than max_sequence_length (30 tokens, 32 sub-tokens): DeLFT truncates
    long_x, long_f = [], []
    i = 0
    while len(long_x) < 40:
        long_x += x[i]
        long_f += f[i]
        i += 1
    x.append(long_x)
    f.append(long_f)
    return x, f, nb_data


# ----------------------------------------------------------------------------------------
# resources made for the models


def write_vectors(path, splits):
    """
    EMBEDDINGS_SIZE-d random vectors (seed 0, uniform in [-1, 1], 4 decimals) for the
    tokens of the training and validation sets, as written, lower-cased, with their digits
    replaced by 0 (the form DeLFT looks up), and that form lower-cased. A third of the
    forms with an upper-case letter are left out, deterministically, so that a token may
    have no vector while its lower-cased form has one. The tokens of the reference
    sequences only are not in the file either.
    """
    import numpy as np

    from delft.utilities.preprocess import normalize_num

    words = set()
    for split in ("train", "valid"):
        for sequence in splits[split][0]:
            for token in sequence:
                for form in (token, token.lower(), normalize_num(token), normalize_num(token).lower()):
                    words.add(form)
    words = sorted(w for w in words if w == w.lower() or zlib.crc32(w.encode("utf-8")) % 3 != 0)
    rng = np.random.default_rng(0)
    vectors = rng.uniform(-1.0, 1.0, size=(len(words), EMBEDDINGS_SIZE))
    with open(path, "w", encoding="utf-8") as out:
        out.write(f"{len(words)} {EMBEDDINGS_SIZE}\n")
        for word, vector in zip(words, vectors):
            out.write(word + " " + " ".join(f"{v:.4f}" for v in vector) + "\n")
    return len(words)


def write_tiny_bert(directory, splits):
    """
    A BERT of 2 layers of width 32, randomly initialised (seed 0), with a cased WordPiece
    vocabulary made from the training data: the special tokens, the tokens seen at least
    3 times, and every character seen, alone and as a continuation (##c).
    """
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    os.makedirs(directory, exist_ok=True)
    counts = collections.Counter(t for s in splits["train"][0] for t in s)
    chars = sorted({c for s in splits["train"][0] for t in s for c in t})
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    whole = sorted(t for t, n in counts.items() if n >= 3 and t.isalnum() and len(t) > 1)
    vocab = specials + chars + ["##" + c for c in chars] + whole
    vocab = list(dict.fromkeys(vocab))
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as out:
        out.write("\n".join(vocab) + "\n")

    # transformers 5 takes the vocabulary as ``vocab`` (it ignores a ``vocab_file``)
    tokenizer = BertTokenizerFast(
        vocab={piece: i for i, piece in enumerate(vocab)}, do_lower_case=False, strip_accents=False
    )
    if len(tokenizer) != len(vocab) or "[UNK]" in tokenizer.tokenize("Octobre 1989"):
        raise RuntimeError("the tiny BERT tokenizer did not take its vocabulary")
    tokenizer.model_max_length = 64
    tokenizer.save_pretrained(directory)

    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=2,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = BertModel(config)
    model.save_pretrained(directory, safe_serialization=True)
    return len(vocab)


# ----------------------------------------------------------------------------------------
# one model: training, then recording, each in a process of its own


def train_one(name, out_dir, work_dir, data_file):
    from delft.sequenceLabelling.wrapper import Sequence

    register_resources(out_dir, work_dir)
    spec = dict(SPECS[name])
    with_features = spec.pop("features", False)
    splits = load_splits(data_file)
    x_train, y_train, f_train = splits["train"]
    x_valid, y_valid, f_valid = splits["valid"]
    if not with_features:
        f_train = f_valid = None

    seed_everything(0)
    model = Sequence(name, device="cpu", nb_workers=0, **spec)
    model.train(x_train, y_train, f_train=f_train, x_valid=x_valid, y_valid=y_valid, f_valid=f_valid)
    target = os.path.join(out_dir, name)
    if os.path.isdir(target):
        shutil.rmtree(target)
    model.save(dir_path=out_dir)


def emission_module(model, ntags):
    """The last linear layer of the model, whose output are the scores the CRF or the argmax decode."""
    import torch

    for attribute in ("linear", "dense2", "classifier", "dense"):
        module = getattr(model, attribute, None)
        if isinstance(module, torch.nn.Linear) and module.out_features == ntags:
            return attribute, module
    raise ValueError(f"no emission layer found in {type(model).__name__}")


def record_one(name, out_dir, work_dir, data_file):
    import torch

    from delft.sequenceLabelling.wrapper import Sequence

    register_resources(out_dir, work_dir)
    with_features = SPECS[name].get("features", False)
    splits = load_splits(data_file)
    x, f, nb_data = reference_inputs(splits)
    if not with_features:
        f = None

    model = Sequence(name, device="cpu", nb_workers=0)
    model.load(dir_path=os.path.join(out_dir, name))
    batch_size = model.model_config.batch_size

    # the emission scores of the first batch, and for a transformer its inputs
    captured = {}
    attribute, module = emission_module(model.model, len(model.p.vocab_tag))

    def on_emissions(_module, _inputs, output):
        captured.setdefault("emissions", output.detach().clone())

    handles = [module.register_forward_hook(on_emissions)]
    transformer = getattr(model.model, "transformer", None)
    if transformer is not None:

        def on_transformer(_module, _args, kwargs, _output):
            if "input_ids" not in captured:
                captured["input_ids"] = kwargs["input_ids"].detach().clone()
                captured["attention_mask"] = kwargs["attention_mask"].detach().clone()

        handles.append(transformer.register_forward_hook(on_transformer, with_kwargs=True))

    with torch.inference_mode():
        tagged = model.tag(x, None, features=f)
    for handle in handles:
        handle.remove()

    labels = [[label for _, label in sequence] for sequence in tagged]
    emissions = captured["emissions"][:NB_EMISSIONS]
    reference = {
        "x": x,
        "f": f,
        "labels": labels,
        "batch_size": batch_size,
        "nb_data_sequences": nb_data,
        "emissions": [[[round(float(v), 6) for v in row] for row in sequence] for sequence in emissions.tolist()],
        "emissions_layer": attribute,
        "emissions_batch_length": int(captured["emissions"].shape[1]),
        "versions": versions(),
    }
    if "input_ids" in captured:
        reference["emissions_input_ids"] = captured["input_ids"][:NB_EMISSIONS].tolist()
        reference["emissions_attention_mask"] = captured["attention_mask"][:NB_EMISSIONS].tolist()
    os.makedirs(os.path.join(out_dir, "reference"), exist_ok=True)
    with open(os.path.join(out_dir, "reference", name + ".json"), "w", encoding="utf-8") as out:
        json.dump(reference, out, ensure_ascii=False, separators=(",", ":"))
        out.write("\n")

    counts = collections.Counter(label for sequence in labels for label in sequence)
    gold = splits["test"][1]
    correct = sum(p == g for ps, gs in zip(labels[:nb_data], gold) for p, g in zip(ps, gs))
    total = sum(len(g) for g in gold)
    print(f"[{name}] labels {dict(counts)}; token accuracy on the {nb_data} data sequences {correct / total:.3f}")


# ----------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--work-dir", default=DEFAULT_WORK_DIR)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--only", default=None, help="comma-separated names of SPECS")
    parser.add_argument("--train", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--record", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    out_dir = os.path.abspath(args.out_dir)
    work_dir = os.path.abspath(args.work_dir)
    os.makedirs(work_dir, exist_ok=True)
    os.chdir(work_dir)
    location = check_delft()

    if args.train:
        return train_one(args.train, out_dir, work_dir, args.data)
    if args.record:
        return record_one(args.record, out_dir, work_dir, args.data)

    print(f"DeLFT from {location}; versions {versions()}")
    os.makedirs(out_dir, exist_ok=True)
    splits = load_splits(args.data)
    nb_words = write_vectors(os.path.join(out_dir, VECTORS_FILE), splits)
    print(f"{VECTORS_FILE}: {nb_words} words")
    # the LMDB database DeLFT compiled from a previous vectors file would be used as it is
    shutil.rmtree(os.path.join(work_dir, "data", "db", EMBEDDINGS_NAME), ignore_errors=True)
    nb_pieces = write_tiny_bert(os.path.join(out_dir, TINY_BERT_DIR), splits)
    print(f"{TINY_BERT_DIR}: {nb_pieces} word pieces")
    # the models name their transformer "tiny-bert", which is found in the work directory
    link = os.path.join(work_dir, TINY_BERT_DIR)
    if os.path.islink(link) or os.path.isfile(link):
        os.remove(link)
    elif os.path.isdir(link):
        shutil.rmtree(link)
    shutil.copytree(os.path.join(out_dir, TINY_BERT_DIR), link)

    names = args.only.split(",") if args.only else list(SPECS)
    script = os.path.abspath(__file__)
    for name in names:
        for step in ("--train", "--record"):
            command = [sys.executable, script, out_dir, "--work-dir", work_dir, "--data", args.data, step, name]
            # no progress bars in the log
            subprocess.run(command, check=True, env=dict(os.environ, TQDM_DISABLE="1"))


if __name__ == "__main__":
    main()
