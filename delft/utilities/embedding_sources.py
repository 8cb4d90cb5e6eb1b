"""Reading word-vector files: word2vec/GloVe/fastText text and word2vec binary, plain, .gz or .zip.

Files are streamed in batches of ``(words, vectors)`` so that a 5 GB file costs the memory of one
batch. Text lines are split on single spaces, as DeLFT does, but the word is everything before the
last ``dim`` fields, so the few GloVe 840B words that contain a space keep their vector instead of
failing. A first line of exactly two integer fields is a ``count dim`` header. Malformed input
raises :class:`~delft.utilities.errors.DataFormatError` naming ``file:line`` (the record number for
binary files).
"""
import gzip
import io
import os
import struct
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Tuple

import numpy as np

from delft.utilities.errors import ConfigurationError, DataFormatError

BATCH_WORDS = 8192
# fastText's own model files (.bin with subword buckets) start with this little-endian int32; they
# are not word2vec binary files and would otherwise fail obscurely in the middle of the first record.
FASTTEXT_MODEL_MAGIC = 793712314
_READ_CHUNK = 1 << 20

Batch = Tuple[List[str], np.ndarray]


@dataclass
class SourceInfo:
    """What a source file said about itself: header values (0 when absent) and its dimension."""
    header_count: int = 0
    dim: int = 0


def is_binary_format(path: str, fmt: Optional[str]) -> bool:
    """Whether ``path`` holds word2vec binary vectors: the registry ``format`` decides when given,
    else the file name (``.bin``, possibly inside ``.gz``/``.zip``)."""
    if fmt:
        return fmt == "bin"
    name = path[:-3] if path.endswith(".gz") else path[:-4] if path.endswith(".zip") else path
    return name.endswith(".bin")


VECTOR_EXTENSIONS = (".vec", ".txt", ".bin")


def vectors_file_problem(path: str) -> Optional[str]:
    """Why ``path`` is not a word-vectors file (None when it is one): its name must end in
    ``.vec``, ``.txt`` or ``.bin`` (possibly inside ``.gz``/``.zip``) and its first line be a
    ``count dim`` header or a word and its values. Checked before a path read from a model
    folder is opened as vectors, so that a folder cannot make a command parse any file.

    >>> vectors_file_problem("/etc/passwd")
    'its name does not end in .vec, .txt or .bin (possibly .gz or .zip)'
    """
    name = path[:-3] if path.endswith(".gz") else path[:-4] if path.endswith(".zip") else path
    if not name.endswith(VECTOR_EXTENSIONS):
        return "its name does not end in .vec, .txt or .bin (possibly .gz or .zip)"
    try:
        stream, raw = _open(path)
    except DataFormatError as error:
        return str(error)
    try:
        first = stream.readline(1 << 16)
    except (OSError, EOFError, zlib.error) as error:
        return f"cannot be read ({error})"
    finally:
        stream.close()
        raw.close()
    fields = first.split()
    if _header(fields) is not None:
        return None
    if is_binary_format(path, None):
        return "a word2vec binary file starts with a 'count dim' line"
    values = [field.decode("utf-8", "replace") for field in fields[1:]]
    if len(values) >= 2 and all(_is_float(value) for value in values):
        return None
    return "its first line is neither a 'count dim' header nor a word and its values"


class _Progress:
    """Bytes of the underlying (possibly compressed) file consumed, for progress reports."""

    def __init__(self, raw):
        self.raw = raw
        self.total = os.fstat(raw.fileno()).st_size or 1

    def fraction(self) -> float:
        return min(self.raw.tell() / self.total, 1.0)


def _open(path: str):
    """``(binary stream, raw file)``; the stream is decompressed for ``.gz`` and ``.zip`` (whose
    first file member is read, the layout of the published GloVe and fastText archives)."""
    raw = open(path, "rb")
    try:
        if path.endswith(".gz"):
            return gzip.GzipFile(fileobj=raw, mode="rb"), raw
        if path.endswith(".zip"):
            archive = zipfile.ZipFile(raw)
            members = [m for m in archive.infolist() if not m.is_dir()]
            if not members:
                raise DataFormatError(path, None, "the zip archive holds no file")
            return archive.open(members[0]), raw
        return io.BufferedReader(raw, _READ_CHUNK), raw
    except (zipfile.BadZipFile, OSError) as error:
        raw.close()
        raise DataFormatError(path, None, f"cannot be opened ({error})") from None


def read_vectors(path: str, fmt: Optional[str] = None, batch_words: int = BATCH_WORDS,
                 on_batch: Optional[Callable[[float], None]] = None,
                 info: Optional[SourceInfo] = None) -> Iterator[Batch]:
    """Stream the vectors of ``path`` as batches ``(words, float32 [n, dim] array)``.

    Args:
        path: the embeddings file (``.vec``/``.txt``/``.bin``, optionally ``.gz`` or ``.zip``).
        fmt: the registry ``format`` (``"bin"`` for word2vec binary, anything else is text);
            ``None`` to decide by the file name.
        batch_words: words per batch.
        on_batch: called after each batch with the fraction of the file read so far.
        info: filled with the header count (0 without header) and the dimension.

    Returns:
        An iterator over batches; empty words and duplicate handling are left to the caller.

    Raises:
        DataFormatError: a malformed line or record, naming ``path:line``.
    """
    info = info if info is not None else SourceInfo()
    stream, raw = _open(path)
    progress = _Progress(raw)
    reader = _binary_batches if is_binary_format(path, fmt) else _text_batches
    try:
        for batch in reader(path, stream, batch_words, info):
            yield batch
            if on_batch is not None:
                on_batch(progress.fraction())
    except (EOFError, zlib.error, zipfile.BadZipFile, gzip.BadGzipFile) as error:
        raise DataFormatError(path, None, f"compressed data is damaged or cut short ({error})") from None
    finally:
        stream.close()
        raw.close()


def _header(fields: List[bytes]) -> Optional[Tuple[int, int]]:
    """``(count, dim)`` when a first line is a word2vec/fastText header, else None."""
    if len(fields) != 2:
        return None
    try:
        return int(fields[0]), int(fields[1])
    except ValueError:
        return None


def _text_batches(path: str, stream, batch_words: int, info: SourceInfo) -> Iterator[Batch]:
    first = stream.readline()
    header = _header(first.split())
    if header is not None:
        info.header_count, info.dim = header
        pending, start = [], 2
    else:
        pending, start = [first] if first.strip() else [], 1
    for line in stream:
        pending.append(line)
        if len(pending) == batch_words:
            yield _parse_text_batch(path, pending, start, info)
            start += len(pending)
            pending = []
    if pending:
        yield _parse_text_batch(path, pending, start, info)


def _parse_text_batch(path: str, lines: List[bytes], start: int, info: SourceInfo) -> Batch:
    """Parse lines numbered from ``start``: one C-level parse of all values (the common case of a
    word without spaces), else line by line, which also finds the exact faulty line."""
    try:
        texts = [line.decode("utf-8").rstrip("\r\n ") for line in lines]
    except UnicodeDecodeError:
        texts = [_decode(path, line, start + i) for i, line in enumerate(lines)]
    if not info.dim:
        number, first = next(((start + i, t) for i, t in enumerate(texts) if t), (start, ""))
        info.dim = len(first.split(" ")) - 1
        if info.dim < 1:
            raise DataFormatError(path, number, "a word without a vector")
    words, values = [], []
    for text in texts:
        word, _, rest = text.partition(" ")
        words.append(word)
        values.append(rest)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # loadtxt's warning on empty input; counts checked below
            vectors = np.loadtxt(values, dtype=np.float32, delimiter=" ", ndmin=2,
                                 comments=None, quotechar=None)
        if vectors.shape != (len(texts), info.dim) or not np.isfinite(vectors).all():
            raise ValueError
    except ValueError:
        words, vectors = _parse_lines(path, texts, start, info.dim)
    return words, vectors


def _decode(path: str, line: bytes, number: int) -> str:
    try:
        return line.decode("utf-8").rstrip("\r\n ")
    except UnicodeDecodeError as error:
        raise DataFormatError(path, number, f"not UTF-8 ({error.reason} at byte {error.start})") from None


def _parse_lines(path: str, texts: List[str], start: int, dim: int) -> Batch:
    """Line by line; blank lines are skipped (a trailing one is common)."""
    words, vectors = [], np.empty((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        if not text:
            continue
        fields = text.rsplit(" ", dim)
        if len(fields) != dim + 1:
            raise DataFormatError(path, start + i, f"{len(fields) - 1} values where {dim} are expected")
        try:
            vectors[len(words)] = np.asarray(fields[1:], dtype=np.float32)
        except ValueError:
            bad = next(f for f in fields[1:] if not _is_float(f))
            raise DataFormatError(path, start + i, f"{bad[:20]!r} is not a number") from None
        if not np.isfinite(vectors[len(words)]).all():
            raise DataFormatError(path, start + i, "a value is not finite (nan or inf)")
        words.append(fields[0])
    return words, vectors[:len(words)]


def _is_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _binary_batches(path: str, stream, batch_words: int, info: SourceInfo) -> Iterator[Batch]:
    """word2vec binary: a ``count dim`` text line, then per word its UTF-8 bytes, a space and
    ``dim`` little-endian float32 (each record optionally followed by a newline)."""
    head = stream.readline()
    if len(head) >= 4 and struct.unpack("<i", head[:4])[0] == FASTTEXT_MODEL_MAGIC:
        raise ConfigurationError(f"{path} is a fastText model, not word2vec vectors: use the .vec "
                                 "text file of the same vectors")
    header = _header(head.split())
    if header is None:
        raise DataFormatError(path, 1, "a word2vec binary file starts with a 'count dim' line")
    info.header_count, info.dim = header
    size = 4 * info.dim
    buffer, position = b"", 0
    words, rows = [], []
    for record in range(1, info.header_count + 1):
        while True:
            space = buffer.find(b" ", position)
            if space >= 0 and len(buffer) - space - 1 >= size:
                break
            chunk = stream.read(_READ_CHUNK)
            if not chunk:
                raise DataFormatError(path, record, f"the file ends inside record {record} of "
                                      f"{info.header_count} announced")
            buffer, position = buffer[position:] + chunk, 0
        word = buffer[position:space].lstrip(b"\n")
        try:
            words.append(word.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise DataFormatError(path, record, f"word not UTF-8 ({error.reason})") from None
        rows.append(buffer[space + 1:space + 1 + size])
        position = space + 1 + size
        if len(words) == batch_words:
            yield words, _binary_rows(path, record, rows, info.dim)
            words, rows = [], []
    if words:
        yield words, _binary_rows(path, info.header_count, rows, info.dim)


def _binary_rows(path: str, last_record: int, rows: List[bytes], dim: int) -> np.ndarray:
    vectors = np.frombuffer(b"".join(rows), dtype="<f4").reshape(len(rows), dim).astype(np.float32)
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
        record = last_record - len(rows) + 1 + int(np.argmin(finite))
        raise DataFormatError(path, record, "a value is not finite (nan or inf)")
    return vectors


def read_all(path: str, fmt: Optional[str] = None) -> Batch:
    """All vectors of a file in memory, for small files: ``(words, float32 [n, dim] matrix)``.

    Raises:
        DataFormatError: a malformed line, or no vectors at all.
    """
    words, blocks = [], []
    for batch_words, vectors in read_vectors(path, fmt):
        words.extend(batch_words)
        blocks.append(vectors)
    if not words:
        raise DataFormatError(path, None, "no word vectors could be read")
    return words, np.concatenate(blocks)
