"""Checkpoint names of the Hugging Face Hub (``allenai/scibert_scivocab_cased``), read from
``huggingface_hub``'s cache, or downloaded into it first where the network allows.

The cache is huggingface_hub's own (``HF_HUB_CACHE``, else ``HF_HOME/hub``; huggingface_hub reads
both, and ``HF_HUB_OFFLINE``, when it is first imported), in its layout:
``models--org--name/refs/main`` names the commit whose files are in
``models--org--name/snapshots/<commit>/``, the folder delft then reads like any checkpoint
directory. A snapshot that has the files delft reads (config, safetensors weights, tokenizer) is
used as it is, without asking the hub; otherwise, unless ``HF_HUB_OFFLINE=1``, those files (only
those: no PyTorch or TensorFlow weights) are downloaded by huggingface_hub, each request with a
:data:`HUB_TIMEOUT`: a machine without network fails in seconds, never hangs.

>>> try:
...     hub_checkpoint("not a model name")
... except LookupError as error:
...     print(error)
not a Hugging Face model name either
"""
import json
import logging
import os
import re

from delft.sequenceLabelling.transformers.checkpoint import (CONFIG_FILE, TOKENIZER_FILES,
                                                             WEIGHTS_FILES)

logger = logging.getLogger(__name__)

# seconds each request to the hub may wait (huggingface_hub's model listing has no limit of its
# own); the listing comes first and is not retried, so without network the answer comes in seconds
HUB_TIMEOUT = 10
# the tokenizer files transformers reads beside the vocabulary itself
_TOKENIZER_EXTRAS = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                     "merges.txt")
_SHARD = re.compile(r"model-\d+-of-\d+\.safetensors")
# what delft reads of a snapshot (huggingface_hub checks these, when it knows the repository's
# files, against the cached snapshot)
_PATTERNS = [CONFIG_FILE, *WEIGHTS_FILES, "model-*-of-*.safetensors", *TOKENIZER_FILES,
             *_TOKENIZER_EXTRAS]


def missing_files(path):
    """What of a checkpoint delft reads is not in the folder ``path``: a list of short phrases."""
    def there(name):
        return os.path.isfile(os.path.join(path, name))

    missing = [] if there(CONFIG_FILE) else [CONFIG_FILE]
    if there(WEIGHTS_FILES[1]):  # sharded: every shard the index names
        try:
            with open(os.path.join(path, WEIGHTS_FILES[1]), encoding="utf-8") as stream:
                shards = set(json.load(stream)["weight_map"].values())
        except (OSError, ValueError, KeyError, AttributeError):
            shards = {WEIGHTS_FILES[1] + " (unreadable)"}
        missing += sorted(s for s in shards if not there(s))
    elif not there(WEIGHTS_FILES[0]):
        missing.append(WEIGHTS_FILES[0])
    if not any(there(name) for name in TOKENIZER_FILES):
        missing.append("tokenizer files")
    return missing


def hub_checkpoint(name):
    """The folder of the hub model ``name`` in huggingface_hub's cache, downloaded if need be.

    Raises:
        LookupError: ``name`` cannot be a hub model, or is neither cached whole nor downloadable;
            its message says why and what to set (one line, to follow the places already tried).
    """
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        raise LookupError("not a Hugging Face model name either") from None
    cache = constants.HF_HUB_CACHE
    try:
        # refs/main -> snapshots/<commit>/, no network
        cached = snapshot_download(name, local_files_only=True, allow_patterns=_PATTERNS)
        missing = missing_files(cached)
    except OSError:  # not in the cache, or a snapshot that huggingface_hub knows is partial
        cached, missing = None, None
    if cached is not None and not missing:
        return cached
    where = (f"its snapshot in the Hugging Face cache ({cached}) lacks {', '.join(missing)}"
             if cached else f"not in the Hugging Face cache ({cache}) either")
    if constants.is_offline_mode():
        raise LookupError(f"{where}, and HF_HUB_OFFLINE=1: download it where the network "
                          "allows, or set HF_HUB_CACHE (or HF_HOME) to the cache that holds it")
    import httpx2  # huggingface_hub's HTTP client: its transport errors reach us as they are

    try:
        return _download(name)
    except (OSError, httpx2.HTTPError) as error:  # huggingface_hub's own errors are OSErrors
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise LookupError(f"{where}, and not downloadable from {constants.ENDPOINT} "
                          f"({type(error).__name__}: {reason}): check the name and the "
                          "network, or set HF_HUB_CACHE (or HF_HOME) to a cache that holds it "
                          "and HF_HUB_OFFLINE=1") from None
    except _Unusable as error:
        raise LookupError(str(error)) from None


class _Unusable(Exception):
    """The hub has the model, but not in a form delft reads."""


def _download(name):
    """Download the files of ``name`` that delft reads into the cache; their snapshot folder."""
    from huggingface_hub import HfApi, hf_hub_download

    files = {s.rfilename for s in HfApi().model_info(name, timeout=HUB_TIMEOUT).siblings or ()}
    if CONFIG_FILE not in files:
        raise _Unusable(f"the hub model has no {CONFIG_FILE}: not a transformers checkpoint")
    if WEIGHTS_FILES[0] in files:
        weights = [WEIGHTS_FILES[0]]
    else:
        weights = sorted(f for f in files if _SHARD.fullmatch(f))
        if WEIGHTS_FILES[1] not in files or not weights:
            others = sorted(f for f in files if f.endswith((".bin", ".h5", ".msgpack")))
            raise _Unusable(f"the hub model has no safetensors weights (it has "
                            f"{', '.join(others) or 'none'}; delft reads model.safetensors "
                            "without torch): convert them to safetensors into a local folder")
        weights.append(WEIGHTS_FILES[1])
    tokenizer = sorted(f for f in files if f in TOKENIZER_FILES + _TOKENIZER_EXTRAS)
    logger.info("downloading %s (%s) from the Hugging Face hub into its cache", name,
                ", ".join([CONFIG_FILE] + weights + tokenizer))
    folder = None
    for filename in [CONFIG_FILE] + weights + tokenizer:
        folder = os.path.dirname(hf_hub_download(name, filename, etag_timeout=HUB_TIMEOUT))
    return folder
