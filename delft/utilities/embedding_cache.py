"""The LMDB cache of word vectors: checking, building and opening it.

Layout (DeLFT 1.x's, and what GROBID's Java ``WordEmbeddings`` reads): one LMDB environment per
embeddings at ``<embedding-lmdb-path>/<name>``, main (unnamed) database, key = the word in UTF-8,
value = its vector as raw little-endian float32 bytes. An existing cache in that layout is used as
it is.

Completeness: a cache is built in ``<name>.partial-<pid>`` and renamed to ``<name>`` only once
committed, synced and described by ``delft-cache.json`` (written last, inside the environment's
directory, where LMDB and Java ignore it): the words, the dimension, the size of ``data.mdb`` and
the size/mtime of the source file. A build killed at any point leaves only a ``.partial-`` directory,
never a cache. Builders of one cache take an ``fcntl`` lock on ``<name>.build-lock``, so the second
waits and then uses the first one's cache.

Checks at each load (cheap: metadata and a few B-tree lookups, nothing proportional to the
vocabulary): the environment opens; ``data.mdb`` is not shorter than the pages LMDB says it uses
(a truncated file would fault on access); sampled values have ``4 * dim`` bytes and are not pickles;
for our caches the record matches (entries, dimension, file size, source unchanged). A cache without
our record is one of DeLFT 1.x (which commits its one write transaction at the end, so an
interrupted build leaves zero entries): it is accepted under DeLFT 1.2's own rule, more than 100
words of more than 10 dimensions. Caches of the TensorFlow-era DeLFT hold ``pickle.dumps(array)``
values: they are recognised by their bytes and never unpickled.
"""
import fcntl
import glob
import json
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Iterable, Optional

import lmdb

from delft.utilities.embedding_sources import SourceInfo, read_vectors
from delft.utilities.errors import ConfigurationError, DataFormatError

logger = logging.getLogger(__name__)

RECORD_FILE = "delft-cache.json"
RECORD_KIND = "delft-embeddings-cache"
RECORD_VERSION = 1
PARTIAL_INFIX = ".partial-"
LOCK_SUFFIX = ".build-lock"
# DeLFT 1.2's test of a database it did not just build; applied to caches without our record
FOREIGN_MIN_WORDS, FOREIGN_MIN_DIM = 100, 10
# a write transaction holds its dirty pages in memory until commit: commit every ~64 MB of vectors
COMMIT_BYTES = 64 << 20
INITIAL_MAP_SIZE = 256 << 20
PROGRESS_SECONDS = 10.0
# LMDB's key limit (py-lmdb's build default): longer words are not stored, as in DeLFT
MAX_KEY_BYTES = 511
# read-only and without LMDB's reader lock: a published cache is never written again, and
# lock=False also lets several processes, and a read-only directory, share it
READ_OPTIONS = dict(readonly=True, lock=False, max_readers=2048, max_spare_txns=2)
# byte prefixes whose B-tree neighbours are sampled, besides the first and last keys
_SAMPLE_PREFIXES = (b"a", b"e", b"m", b"s", b"the", b"\xc3")

_envs = {}
_envs_lock = threading.RLock()
# bumped by every close_env, so that holders of an environment know to fetch it again
_generation = 0


def generation() -> int:
    """A number that changes whenever an environment is closed (see :func:`open_env`)."""
    return _generation


def open_env(path: str) -> lmdb.Environment:
    """The read-only environment of ``path``, opened once per process (py-lmdb refuses a second
    open of one path in a process) and reopened after a fork, whose inherited handle is unusable."""
    key = os.path.realpath(path)
    with _envs_lock:
        cached = _envs.get(key)
        if cached is not None and cached[0] == os.getpid():
            return cached[1]
        _envs.pop(key, None)
        env = lmdb.open(path, **READ_OPTIONS)
        _envs[key] = (os.getpid(), env)
        return env


def encode_key(word: str) -> Optional[bytes]:
    """The LMDB key of ``word``, None when it cannot be stored (empty, or over the key limit).
    ``surrogatepass``: a lone surrogate (possible in a string from Java) is simply not found."""
    key = word.encode("utf-8", "surrogatepass")
    return key if 0 < len(key) < MAX_KEY_BYTES else None


def close_env(path: str) -> None:
    """Close this process' environment of ``path``; the next :func:`open_env` reopens it."""
    global _generation
    with _envs_lock:
        cached = _envs.pop(os.path.realpath(path), None)
        _generation += 1
    if cached is not None and cached[0] == os.getpid():
        cached[1].close()


@dataclass
class CacheState:
    """What :func:`inspect` found: ``problem`` is None for a usable cache."""
    words: int = 0
    dim: int = 0
    problem: Optional[str] = None
    exists: bool = True


def source_signature(path: Optional[str]) -> Optional[dict]:
    """Size and mtime of a source file (None when it is absent), to notice a replaced file."""
    if path is None or not os.path.isfile(path):
        return None
    stat = os.stat(path)
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def is_pickle(value: bytes) -> bool:
    """A value written by the TensorFlow-era DeLFT: ``pickle.dumps`` of a numpy array (protocol
    2-5 magic, and the numpy module name in the first bytes), the test DeLFT 1.2 uses."""
    return len(value) > 2 and value[0] == 0x80 and value[1] in (2, 3, 4, 5) and b"numpy" in value[:64]


def inspect(path: str, source: Optional[dict] = None) -> CacheState:
    """Check the cache at ``path`` without reading anything proportional to its vocabulary.

    Args:
        path: the environment directory ``<embedding-lmdb-path>/<name>``.
        source: :func:`source_signature` of the registry's source file, None when it is absent.

    Returns:
        The state; a cache with a ``problem`` must not be used.
    """
    if not os.path.isdir(path):
        return CacheState(exists=False, problem="no cache")
    data = os.path.join(path, "data.mdb")
    record = _read_record(path)
    if isinstance(record, str):
        return CacheState(problem=record)
    try:
        env = open_env(path)
        psize, entries = env.stat()["psize"], env.stat()["entries"]
        if os.path.getsize(data) < (env.info()["last_pgno"] + 1) * psize:
            close_env(path)
            return CacheState(problem="data.mdb is truncated")
        state = _check_values(env, entries)
    except (lmdb.Error, OSError) as error:
        close_env(path)
        return CacheState(problem=f"LMDB cannot read it ({error})")
    if state.problem is None:
        state.problem = _compare(state, record, os.path.getsize(data), source)
    if state.problem is not None:
        close_env(path)
    return state


def _read_record(path: str):
    """Our completeness record, None when absent (a DeLFT 1.x cache), or a problem string."""
    try:
        with open(os.path.join(path, RECORD_FILE), encoding="utf-8") as stream:
            record = json.load(stream)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        return f"its completeness record is unreadable ({error})"
    if not isinstance(record, dict) or record.get("kind") != RECORD_KIND:
        return "its completeness record is not one of delft"
    return record


def _sample_values(cursor: lmdb.Cursor) -> Iterable[memoryview]:
    """A few values spread over the B-tree: the first, the last, and after some prefixes."""
    moves = [cursor.first, cursor.last] + [partial(cursor.set_range, p) for p in _SAMPLE_PREFIXES]
    for move in moves:
        if move():
            yield cursor.value()


def _check_values(env: lmdb.Environment, entries: int) -> CacheState:
    state = CacheState(words=entries)
    lengths = set()
    with env.begin(buffers=True) as txn:
        for value in _sample_values(txn.cursor()):
            if is_pickle(bytes(value[:64])):
                return CacheState(words=entries, problem="it holds pickled vectors (TensorFlow-era DeLFT)")
            lengths.add(len(value))
    if entries == 0:
        state.problem = "it is empty"
    elif len(lengths) != 1 or next(iter(lengths)) % 4:
        state.problem = f"its values have inconsistent byte lengths {sorted(lengths)}"
    else:
        state.dim = next(iter(lengths)) // 4
    return state


def _compare(state: CacheState, record: Optional[dict], data_size: int,
             source: Optional[dict]) -> Optional[str]:
    if record is None:
        if state.words > FOREIGN_MIN_WORDS and state.dim > FOREIGN_MIN_DIM:
            return None
        return (f"it has no completeness record and only {state.words} words of {state.dim} "
                "dimensions (an interrupted or foreign build)")
    expected = (record.get("words"), record.get("dim"), record.get("data_size"))
    if expected != (state.words, state.dim, data_size):
        return (f"it does not match its completeness record: {state.words} words x {state.dim}, "
                f"{data_size} bytes where the record says {expected[0]} x {expected[1]}, {expected[2]}")
    if source is not None and record.get("source") not in (None, source):
        return "its source file has changed since it was built"
    return None


def build(path: str, source_path: str, fmt: Optional[str], source: Optional[dict],
          label: str) -> CacheState:
    """Build the cache at ``path`` from ``source_path`` unless another process did it meanwhile.

    Args:
        path: the environment directory to create or replace.
        source_path: the embeddings file.
        fmt: the registry ``format`` (see :func:`~delft.utilities.embedding_sources.read_vectors`).
        source: :func:`source_signature` of ``source_path``, stored in the record.
        label: the embeddings name, for the log.

    Returns:
        The state of the usable cache at ``path``.

    Raises:
        DataFormatError: a malformed source file.
        ConfigurationError: the cache cannot be written (read-only directory, full disk...).
    """
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path + LOCK_SUFFIX, "a") as lock:
            return _build_locked(lock, path, source_path, fmt, source, label)
    except (OSError, lmdb.Error) as error:  # a read-only directory, a full disk...
        raise ConfigurationError(f"{label}: the cache {path} cannot be built ({error})") from None


def _build_locked(lock, path: str, source_path: str, fmt: Optional[str], source: Optional[dict],
                  label: str) -> CacheState:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        logger.info("%s: another process is building %s, waiting for it", label, path)
        fcntl.flock(lock, fcntl.LOCK_EX)
    state = inspect(path, source)
    if state.problem is None:  # built by the process we waited for
        return state
    if state.exists:
        logger.warning("%s: the cache %s is not usable (%s): rebuilding it from %s",
                       label, path, state.problem, source_path)
    for leftover in glob.glob(glob.escape(path + PARTIAL_INFIX) + "*"):
        # the lock is ours, so these are from builds that died
        shutil.rmtree(leftover, ignore_errors=True)
    building = f"{path}{PARTIAL_INFIX}{os.getpid()}"
    try:
        words, dim = _write(building, source_path, fmt, label)
        _write_record(building, words, dim, source, source_path)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    _publish(building, path)
    state = inspect(path, source)
    if state.problem is not None:
        raise DataFormatError(path, None, f"the cache just built is not readable: {state.problem}")
    return state


def _write(building: str, source_path: str, fmt: Optional[str], label: str):
    """Stream ``source_path`` into a new environment; ``(words stored, dimension)``."""
    env = lmdb.open(building, map_size=INITIAL_MAP_SIZE, subdir=True)
    info, read, skipped, pending, pending_bytes = SourceInfo(), 0, 0, [], 0
    started = last_log = time.monotonic()

    def report(fraction):
        nonlocal last_log
        if time.monotonic() - last_log >= PROGRESS_SECONDS:
            last_log = time.monotonic()
            logger.info("%s: building the cache, %.0f%% of %s read in %.0f s", label,
                        100 * fraction, source_path, last_log - started)

    try:
        for words, vectors in read_vectors(source_path, fmt, on_batch=report, info=info):
            rows = vectors.astype("<f4", copy=False)
            read += len(words)
            for word, row in zip(words, rows):
                key = encode_key(word)
                if key is not None:  # LMDB (and Java) reject empty and over-long keys
                    pending.append((key, row.tobytes()))
                else:
                    skipped += 1
            pending_bytes += rows.nbytes
            if pending_bytes >= COMMIT_BYTES:
                _put(env, pending)
                pending, pending_bytes = [], 0
        _put(env, pending)
        env.sync(True)
        words = env.stat()["entries"]
    finally:
        env.close()
    if words == 0:
        raise DataFormatError(source_path, None, "no word vectors could be read")
    if skipped:
        logger.warning("%s: %d words of %s skipped (empty, or over LMDB's %d-byte key limit)",
                       label, skipped, source_path, MAX_KEY_BYTES - 1)
    if info.header_count and info.header_count != read:
        logger.warning("%s: %s announces %d words in its header and holds %d", label,
                       source_path, info.header_count, read)
    logger.info("%s: cache built, %d words x %d dimensions in %.0f s", label, words, info.dim,
                time.monotonic() - started)
    return words, info.dim


def _put(env: lmdb.Environment, items: Iterable) -> None:
    """Write ``items`` in one transaction, doubling the map when it is full (which keeps the
    size recorded in the file close to the data, unlike a fixed 100 GiB map)."""
    while True:
        try:
            with env.begin(write=True) as txn:
                txn.cursor().putmulti(items)
            return
        except lmdb.MapFullError:
            env.set_mapsize(env.info()["map_size"] * 2)


def _write_record(building: str, words: int, dim: int, source: Optional[dict], source_path: str):
    record = {"kind": RECORD_KIND, "version": RECORD_VERSION, "words": words, "dim": dim,
              "data_size": os.path.getsize(os.path.join(building, "data.mdb")),
              "source": source, "source_path": os.path.abspath(source_path),
              "value": "raw little-endian float32"}
    target = os.path.join(building, RECORD_FILE)
    with open(target, "w", encoding="utf-8") as stream:
        json.dump(record, stream, indent=1)
        stream.flush()
        os.fsync(stream.fileno())


def _publish(building: str, path: str) -> None:
    """Move the finished build to ``path`` (replacing an unusable cache there), durably."""
    close_env(path)
    if os.path.lexists(path):
        aside = f"{building}-replaced"
        os.rename(path, aside)
        shutil.rmtree(aside, ignore_errors=True)
    os.rename(building, path)
    directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)

