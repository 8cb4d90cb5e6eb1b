"""DeLFT's ``Embeddings``: static word vectors by name, described by ``resources-registry.json``
and cached in LMDB (the cache GROBID's Java also reads).

GROBID runs ``from delft.utilities.Embeddings import Embeddings`` at start-up: this module imports
numpy and lmdb only, never TensorFlow.

Where things are looked up:

* The registry: the ``resource_registry`` argument (a dict, or the path of a JSON file), else the
  file named by the environment variable ``DELFT_RESOURCE_REGISTRY``, else the one shipped in
  ``delft/resources/resources-registry.json``. Its shape is DeLFT's: ``embedding-lmdb-path`` and
  ``embeddings: [{name, path, type, format, lang, item, url}]`` (``url`` only says where to get a
  file: nothing is downloaded). A relative ``path`` is relative to the current directory, as in
  DeLFT.
* The cache directory: the environment variable ``DELFT_EMBEDDING_LMDB_PATH`` when set, else the
  registry's ``embedding-lmdb-path`` (``data/db`` in the shipped registry, relative to the current
  directory as in DeLFT). A registry without it, or with ``null``/``"None"``, loads the vectors in
  memory, as DeLFT does; so does ``use_cache=False``.

Lookup semantics are DeLFT 1.2.0's: the key is the word as given, with no lowercase fallback (only
the lowercase ``wiki.fr`` vectors get lowercased words, as in DeLFT); an unknown word gives a zero
vector. Digits are replaced by ``0`` by the *caller* in DeLFT (``to_vector_single``), so
:meth:`Embeddings.get_word_vector` leaves them alone by default, while the model's batch lookup
:meth:`Embeddings.get_word_vectors` applies :func:`normalize_num` by default, as DeLFT's model
input and GROBID's Java ``WordEmbeddings`` do.
"""
import logging
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import lmdb
import numpy as np

from delft.utilities import embedding_cache
from delft.utilities.embedding_sources import is_binary_format, read_all
from delft.utilities.errors import ConfigurationError, DataFormatError, DelftError, ModelLoadError
from delft.utilities.json_files import read_json_object

logger = logging.getLogger(__name__)

REGISTRY_ENV = "DELFT_RESOURCE_REGISTRY"
LMDB_PATH_ENV = "DELFT_EMBEDDING_LMDB_PATH"
DEFAULT_REGISTRY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "resources", "resources-registry.json")
SUPPORTED_FORMATS = ("vec", "txt", "bin")
# DeLFT lowercases the words looked up in these (lowercase) vectors, and only in these
LOWERCASE_NAMES = ("wiki.fr", "wiki.fr.bin")
# DeLFT's normalize_num: r"[0-9０１２３４５６７８９]" -> "0" (ASCII and full-width digits only;
# Java's Character.isDigit also maps other scripts' digits, which these embeddings rarely hold)
_DIGITS = str.maketrans({digit: "0" for digit in "123456789０１２３４５６７８９"})

Registry = Dict[str, Any]


def normalize_num(word: str) -> str:
    """DeLFT's digit normalisation before lookup: each ASCII or full-width digit becomes ``0``.

    Args:
        word: a token.

    Returns:
        The token with its digits replaced.

    >>> normalize_num("12/０３/2024")
    '00/00/0000'
    """
    return word.translate(_DIGITS)


def load_resource_registry(path: Optional[Union[str, os.PathLike]] = None) -> Registry:
    """Read a resources registry.

    Args:
        path: the JSON file; None for ``$DELFT_RESOURCE_REGISTRY``, else the shipped registry.

    Returns:
        The registry as a dict.

    Raises:
        ConfigurationError: the file does not exist, or is not a JSON object (naming the file
            and the line).
    """
    from_env = path is None and bool(os.environ.get(REGISTRY_ENV))
    path = os.fspath(path) if path is not None else os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY
    try:
        return read_json_object(path, error=ConfigurationError)
    except FileNotFoundError:
        origin = f" (named by {REGISTRY_ENV})" if from_env else ""
        raise ConfigurationError(f"resource registry {path}{origin} not found") from None


class Embeddings:
    """Static word embeddings (word2vec, GloVe, fastText vectors) by their registry name.

    The first use of an embeddings builds its LMDB cache from the source file (minutes for a
    few GB, logged); later uses open the cache in well under a second and keep nothing of the
    vocabulary in memory. See :mod:`delft.utilities.embedding_cache` for how an interrupted,
    damaged or pickled (TensorFlow-era DeLFT) cache is told apart and rebuilt.

    Args:
        name: the registry name, e.g. ``"glove-840B"``.
        resource_registry: a registry dict, or the path of a registry file; None for the
            default (see the module documentation).
        lang: the language, replaced by the registry entry's ``lang``.
        extension: the file format when the entry gives none and the file name does not say.
        use_cache: False loads the vectors in memory instead of using the LMDB cache.
        load: False creates the object without loading anything (DeLFT's option).

    Attributes:
        name, embed_size (the dimension), vocab_size (the words stored), lang, extension,
        cache_path (the LMDB directory, None in memory), registry.

    Raises:
        ConfigurationError: unknown name, missing source file without a usable cache,
            unsupported format.
        DataFormatError: a malformed embeddings file (``file:line``) or registry.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     source = os.path.join(tmp, "tiny.vec")
    ...     with open(source, "w", encoding="utf-8") as f:
    ...         _ = f.write("2 3\\nJune 0.5 0.25 1\\n0000 -1 0 2\\n")
    ...     registry = {"embedding-lmdb-path": os.path.join(tmp, "db"),
    ...                 "embeddings": [{"name": "tiny", "path": source, "format": "vec"}]}
    ...     embeddings = Embeddings("tiny", resource_registry=registry)
    ...     print(embeddings.vocab_size, embeddings.embed_size, "June" in embeddings)
    ...     print(embeddings.get_word_vectors(["June", "2024", "july"]).tolist())
    ...     embeddings.close()
    2 3 True
    [[0.5, 0.25, 1.0], [-1.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
    """

    def __init__(self, name: str, resource_registry: Optional[Union[Registry, str, os.PathLike]] = None,
                 lang: str = "en", extension: str = "vec", use_cache: bool = True, load: bool = True):
        self.name = name
        self.lang = lang
        self.extension = extension
        self.use_cache = use_cache
        self.embed_size = 0
        self.static_embed_size = 0
        self.vocab_size = 0
        self.cache_path: Optional[str] = None
        self.registry, self._registry_origin = self._registry_of(resource_registry)
        self.embedding_lmdb_path = self._lmdb_path()
        self._lowercase = name in LOWERCASE_NAMES
        self._index: Optional[Dict[str, int]] = None
        self._matrix: Optional[np.ndarray] = None
        self._env: Optional[lmdb.Environment] = None
        self._env_token: Optional[Tuple[int, int]] = None
        if load:
            self.make_embeddings_simple()

    @staticmethod
    def _registry_of(resource_registry) -> Tuple[Registry, str]:
        if isinstance(resource_registry, dict):
            return resource_registry, "the registry given"
        registry = load_resource_registry(resource_registry)
        return registry, os.fspath(resource_registry or os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY)

    def _lmdb_path(self) -> Optional[str]:
        path = os.environ.get(LMDB_PATH_ENV) or self.registry.get("embedding-lmdb-path")
        return None if path in (None, "", "None") else os.fspath(path)

    def get_description(self, name: str) -> Optional[dict]:
        """The registry entry of ``name`` (searched as DeLFT does: ``embeddings``, then
        ``embeddings-contextualized``, then ``transformers``), or None."""
        for section in ("embeddings", "embeddings-contextualized", "transformers"):
            for entry in self.registry.get(section) or ():
                if isinstance(entry, dict) and entry.get("name") == name:
                    return entry
        return None

    def make_embeddings_simple(self, name: Optional[str] = None) -> None:
        """Load the embeddings: open (building it if needed) the LMDB cache, or read the file
        in memory. Called by the constructor unless ``load=False``.

        Args:
            name: other embeddings to load instead (DeLFT's signature); None for ``self.name``.

        Raises:
            ConfigurationError: see the class.
            DataFormatError: see the class.
        """
        if name is not None:
            self.name, self._lowercase = name, name in LOWERCASE_NAMES
        entry = self._entry()
        source = os.fspath(entry["path"]) if entry.get("path") else None
        fmt = entry.get("format")
        self.lang = entry.get("lang", self.lang)
        self.extension = "bin" if source and is_binary_format(source, fmt) else fmt or self.extension
        if self.embedding_lmdb_path is None or not self.use_cache:
            self._load_in_memory(entry, source)
        else:
            self._load_cache(entry, source)
        self.static_embed_size = self.embed_size

    def _entry(self) -> dict:
        if not isinstance(self.name, str) or not self.name or self.name in (".", "..") \
                or "/" in self.name or os.sep in self.name:
            raise ConfigurationError(f"embeddings name {self.name!r}: a registry name, not a path")
        entry = self.get_description(self.name)
        if entry is None:
            raise ConfigurationError(f"embeddings {self.name!r} are not in {self._registry_origin}: "
                                     f"add an entry, or point {REGISTRY_ENV} at a registry that has one")
        fmt = entry.get("format")
        if fmt is not None and fmt not in SUPPORTED_FORMATS:
            raise ConfigurationError(f"embeddings {self.name!r} in {self._registry_origin}: format "
                                     f"{fmt!r} is not supported (supported: {', '.join(SUPPORTED_FORMATS)})")
        return entry

    def _missing_source(self, entry: dict, source: Optional[str], reason: str) -> ConfigurationError:
        where = entry.get("url")
        hint = f"; the vectors can be had from {where}" if where else ""
        return ConfigurationError(f"embeddings {self.name!r} ({self._registry_origin}): {reason}, and "
                                  f"the file of its entry, {source!r}, does not exist{hint}")

    def _load_in_memory(self, entry: dict, source: Optional[str]) -> None:
        if source is None or not os.path.isfile(source):
            raise self._missing_source(entry, source, "the vectors are to be loaded in memory")
        words, vectors = read_all(source, entry.get("format"))
        # the last row stays zero: the vector of every unknown word
        self._matrix = np.zeros((len(vectors) + 1, vectors.shape[1]), dtype=np.float32)
        self._matrix[:-1] = vectors
        self._index = {word: row for row, word in enumerate(words)}
        self.vocab_size, self.embed_size = len(self._index), vectors.shape[1]
        logger.info("%s: %d words x %d dimensions loaded in memory from %s", self.name,
                    self.vocab_size, self.embed_size, source)

    def _load_cache(self, entry: dict, source: Optional[str]) -> None:
        path = os.path.join(self.embedding_lmdb_path, self.name)
        available = source if source and os.path.isfile(source) else None
        signature = embedding_cache.source_signature(available)
        state = embedding_cache.inspect(path, signature)
        if state.problem is not None:
            if available is None:
                reason = f"the cache {path} is not usable ({state.problem})" if state.exists \
                    else f"there is no cache {path}"
                raise self._missing_source(entry, source, reason)
            if not state.exists:
                logger.info("%s: building the cache %s from %s (once per embeddings)", self.name,
                            path, available)
            state = embedding_cache.build(path, available, entry.get("format"), signature, self.name)
        self.cache_path = path
        self.vocab_size, self.embed_size = state.words, state.dim

    def _key(self, word: str, normalize_digits: bool) -> str:
        if normalize_digits:
            word = word.translate(_DIGITS)
        return word.lower() if self._lowercase else word

    def _keys(self, words: Sequence[str], normalize_digits: bool) -> List[str]:
        """The lookup keys of a batch. Digits are translated in one call on the joined batch
        (several times faster than per word); a word holding the separator goes the per-word
        way."""
        if normalize_digits and not self._lowercase:
            keys = "\x00".join(words).translate(_DIGITS).split("\x00")
            if len(keys) == len(words):
                return keys
        return [self._key(word, normalize_digits) for word in words]

    def get_word_vectors(self, words: Sequence[str], normalize_digits: bool = True) -> np.ndarray:
        """The vectors of ``words``, looked up in one read transaction (the model's batch lookup).

        Args:
            words: the tokens.
            normalize_digits: apply :func:`normalize_num` first, as DeLFT's model input and
                GROBID's Java lookup do.

        Returns:
            A float32 array ``[len(words), embed_size]``; zero rows for unknown words.

        Raises:
            DataFormatError: the cache turned out damaged (it names the cache to delete).
        """
        unique: Dict[str, int] = {}
        inverse = [unique.setdefault(key, len(unique)) for key in self._keys(words, normalize_digits)]
        if self._index is not None:
            zero = len(self._matrix) - 1
            table = self._matrix[[self._index.get(key, zero) for key in unique]]
        else:
            table = self._lookup(list(unique))
        # the table is the result when no word repeats (no gather copy)
        return table if len(unique) == len(inverse) else table[inverse]

    def _lookup(self, keys: List[str]) -> np.ndarray:
        size = 4 * self.embed_size
        zero = bytes(size)  # an unknown word's vector
        values = []
        try:
            with self._environment().begin(buffers=True) as txn:
                get = txn.get
                for key in keys:
                    # encode_key inlined: this loop is the lookup's cost
                    encoded = key.encode("utf-8", "surrogatepass")
                    value = get(encoded) if 0 < len(encoded) < embedding_cache.MAX_KEY_BYTES else None
                    if value is None:
                        value = zero
                    elif len(value) != size:
                        raise DataFormatError(self.cache_path, None, f"the vector of {key!r} has "
                                              f"{len(value)} bytes where {size} are expected: the cache "
                                              "is damaged, delete it to have it rebuilt")
                    values.append(value)
                # one copy out of the map, inside the transaction that keeps the buffers valid;
                # a bytearray so that the array handed out is writable
                joined = bytearray().join(values)
        except lmdb.Error as error:
            raise DataFormatError(self.cache_path, None, f"the cache is damaged ({error}): delete it "
                                  "to have it rebuilt") from None
        table = np.frombuffer(joined, dtype="<f4").reshape(len(keys), self.embed_size)
        return table.astype(np.float32, copy=False)  # a no-op on little-endian machines

    def get_word_vector(self, word: str, normalize_digits: bool = False) -> np.ndarray:
        """The vector of one word, DeLFT's ``get_word_vector``: zeros when unknown.

        Args:
            word: the token, looked up as given (DeLFT's callers normalise digits beforehand).
            normalize_digits: apply :func:`normalize_num` first.

        Returns:
            A float32 vector of ``embed_size`` values.
        """
        return self.get_word_vectors([word], normalize_digits)[0]

    def __contains__(self, word: str) -> bool:
        """Whether ``word``, as given (no digit normalisation), has a vector."""
        key = self._key(word, normalize_digits=False)
        if self._index is not None:
            return key in self._index
        encoded = embedding_cache.encode_key(key)
        if encoded is None:
            return False
        with self._environment().begin(buffers=True) as txn:
            return txn.get(encoded) is not None

    def _environment(self) -> lmdb.Environment:
        """The shared environment of the cache, fetched again only after a fork or a close
        (resolving the path on every lookup would cost more than small lookups themselves)."""
        token = (os.getpid(), embedding_cache.generation())
        if self._env_token != token:
            self._env, self._env_token = embedding_cache.open_env(self.cache_path), token
        return self._env

    def __getstate__(self) -> dict:
        """Picklable (e.g. for worker processes): the environment is reopened where unpickled."""
        state = dict(self.__dict__)
        state["_env"] = state["_env_token"] = None
        return state

    def close(self) -> None:
        """Close the LMDB environment of this process (reopened on the next lookup)."""
        if self.cache_path is not None:
            embedding_cache.close_env(self.cache_path)


def open_embeddings(name: str, resource_registry=None) -> Embeddings:
    """The embeddings ``name``: a name of the registry, or the path of a vectors file.

    A file is described by a one-entry registry (the registry's cache location kept); its cache
    is named after the file and a hash of its absolute path, so two files of one name never share
    a cache.

    Args:
        name: a registry name, or a file path.
        resource_registry: as for :class:`Embeddings`.

    Returns:
        The loaded :class:`Embeddings`.
    """
    if not os.path.isfile(name):
        return Embeddings(name, resource_registry=resource_registry)
    import hashlib

    path = os.path.abspath(name)
    registry = dict(Embeddings._registry_of(resource_registry)[0])
    stem = os.path.basename(path).split(".")[0] or "vectors"
    cache_name = f"{stem}-{hashlib.sha1(path.encode('utf-8')).hexdigest()[:8]}"
    registry["embeddings"] = [{"name": cache_name, "path": path, "type": "static"}]
    return Embeddings(cache_name, resource_registry=registry)


def open_model_embeddings(name: str, folder: str, size: int) -> Embeddings:
    """The embeddings ``name`` a model folder's config.json names, for the model of ``folder``
    trained on ``size``-wide vectors; anything that cannot serve it is one
    :class:`~delft.utilities.errors.ModelLoadError` naming the folder.

    A file path is opened only when it is a vectors file (:func:`vectors_file_problem`): a model
    folder does not make a command parse, or cache, whatever file it names.
    """
    from delft.utilities.embedding_sources import vectors_file_problem

    if os.sep in name or os.path.isfile(name):
        problem = vectors_file_problem(name) if os.path.isfile(name) else "no such file"
        if problem:
            raise ModelLoadError(f"{folder}: config.json names {name!r} as its word embeddings, "
                                 f"which is not a vectors file ({problem})")
    try:
        embeddings = open_embeddings(name)
    except DelftError as error:
        raise ModelLoadError(f"{folder}: the model's word embeddings {name!r} cannot be opened "
                             f"({error})") from None
    if embeddings.embed_size != size:
        raise ModelLoadError(f"{folder}: the model was trained on {size}-wide vectors, the "
                             f"embeddings {name!r} have {embeddings.embed_size}")
    return embeddings


def embeddings_for_model(name, loading_from=None, size=None):
    """The word embeddings ``name`` of a model: opened by name for a training, or, for the model
    folder ``loading_from`` being loaded, checked against it (:func:`open_model_embeddings`,
    ``size``-wide vectors)."""
    if loading_from is None:
        embeddings = open_embeddings(name)
    else:
        embeddings = open_model_embeddings(name, loading_from, size)
    logger.info("word embeddings %s: %d words of %d values", name, embeddings.vocab_size,
                embeddings.embed_size)
    return embeddings
