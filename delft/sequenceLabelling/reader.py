"""Readers of sequence labelling data, with DeLFT's function names and return values.

Every reader returns numpy object arrays with one entry per sequence: ``x`` (the tokens), ``y`` (the IOB2
labels) and, for GROBID feature matrices, ``f`` (per token, the list of its feature strings). Malformed
input raises :class:`~delft.utilities.errors.DataFormatError` naming the file and the line.
GROBID's matrices are read here; CoNLL in ``reader_conll.py``, TEI in ``reader_tei.py``; every
reader is imported from this module, DeLFT's (GROBID's start-up imports it).

GROBID feature matrix, one token per line, a blank (or whitespace-only) line between sequences::

    June june J Ju Jun June e ne une June LINESTART INITCAP NODIGIT 0 0 1 NOPUNCT I-<month>
    2005 2005 2 20 200 2005 5 05 005 2005 LINEEND NOCAPS ALLDIGIT 0 1 0 NOPUNCT I-<year>

>>> x, y, f = load_data_and_labels_crf_string("June a I-<month>\\n2005 b I-<year>\\n\\n5 c I-<day>\\n")
>>> x[0], y[0], f[0]
(['June', '2005'], ['B-<month>', 'B-<year>'], [['a'], ['b']])
"""
import gzip
import zlib

from delft.sequenceLabelling.reader_common import (  # noqa: F401 - DeLFT's import path
    decoded_lines, iob1_to_iob2, iter_column_sequences, object_array, read_column_sequences,
    read_lines, source_name, translate_grobid_label_to_iob, translate_iob_label_to_grobid)
from delft.sequenceLabelling.reader_conll import (  # noqa: F401 - DeLFT's import path
    load_data_and_labels_conll, load_data_and_labels_ontonotes)
from delft.sequenceLabelling.reader_tei import (  # noqa: F401 - DeLFT's import path
    load_data_and_labels_xml_file, load_data_and_labels_xml_string)
from delft.utilities.errors import DataFormatError


def _labelled_crf(lines, source):
    sequences = read_column_sequences(lines, source, min_columns=2)
    x = [[row[0] for row in rows] for _, rows in sequences]
    y = [[translate_grobid_label_to_iob(row[-1]) for row in rows] for _, rows in sequences]
    f = [[row[1:-1] for row in rows] for _, rows in sequences]
    return object_array(x), object_array(y), object_array(f)


def _unlabelled_crf(lines, source):
    return _unlabelled_columns([rows for _, rows in
                                iter_column_sequences(lines, source, min_columns=1)])


def _unlabelled_columns(sequences):
    x = [[row[0] for row in rows] for rows in sequences]
    f = [[row[1:] for row in rows] for rows in sequences]
    return object_array(x), object_array(f)


def load_data_and_labels_crf_file(filepath):
    """Tokens, IOB2 labels and features ``(x, y, f)`` of a labelled GROBID matrix file (plain or ``.gz``).

    Each line is ``token feature_1 ... feature_n label``; ``f[i][j]`` is the feature list of token j.
    """
    return _labelled_crf(read_lines(filepath), str(filepath))


def load_data_and_labels_crf_content(the_file, source=None):
    """``(x, y, f)`` of a labelled GROBID matrix given as a file object or any iterable of lines.

    Lines may be ``str`` or UTF-8 ``bytes``; ``source`` names the input in errors (default: the file's name).

    >>> x, y, f = load_data_and_labels_crf_content(["10 a I-<day>", "May b I-<month>"])
    >>> y[0]
    ['B-<day>', 'B-<month>']
    """
    source = source_name(the_file, source)
    return _labelled_crf(decoded_lines(the_file, source), source)


def load_data_and_labels_crf_string(crf_string, source="<string>"):
    """``(x, y, f)`` of a labelled GROBID matrix held in a string."""
    return _labelled_crf(crf_string.split("\n"), source)


def load_data_crf_file(filepath):
    """Tokens and features ``(x, f)`` of an unlabelled GROBID matrix file: every column after the token
    is a feature."""
    return _unlabelled_crf(read_lines(filepath), str(filepath))


def iter_data_crf_file(filepath, chunk_size=5000):
    """Stream ``(x, f)`` chunks of at most ``chunk_size`` sequences of an unlabelled GROBID matrix file.

    The file is read line by line (plain or ``.gz``), so a file of any size is tagged in bounded
    memory; errors name the file and the line as the other readers do.
    """
    source = str(filepath)
    opener = gzip.open if source.endswith(".gz") else open
    chunk = []
    try:
        with opener(filepath, "rb") as stream:
            for _, rows in iter_column_sequences(decoded_lines(stream, source), source, 1):
                chunk.append(rows)
                if len(chunk) == chunk_size:
                    yield _unlabelled_columns(chunk)
                    chunk = []
    except (OSError, EOFError, zlib.error) as error:
        if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        raise DataFormatError(source, None, f"not a readable gzip file ({error})") from None
    if chunk:
        yield _unlabelled_columns(chunk)


def iter_text_file(filepath, chunk_size=5000):
    """Stream the texts of a UTF-8 file, one per non-blank line (line ends removed), in lists of
    at most ``chunk_size``; a line that is not UTF-8 is a ``DataFormatError`` naming it."""
    texts = []
    with open(filepath, "rb") as stream:
        for line in decoded_lines(stream, str(filepath)):
            line = line.rstrip("\r\n")
            if line.strip():
                texts.append(line)
            if len(texts) == chunk_size:
                yield texts
                texts = []
    if texts:
        yield texts


def token_line_number(filepath, sequence_index, token_index):
    """The line of a column file (plain or ``.gz``) holding token ``token_index`` of its sequence
    ``sequence_index`` (both counted from 0), to place an error found after reading; None when
    the file has fewer sequences.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".crf", delete=False) as out:
    ...     _ = out.write("a 1\\nb 2\\n\\n\\nc 3\\nd 4\\n")
    >>> token_line_number(out.name, 1, 1)
    6
    """
    source = str(filepath)
    opener = gzip.open if source.endswith(".gz") else open
    with opener(filepath, "rb") as stream:
        sequences = iter_column_sequences(decoded_lines(stream, source), source, 1)
        for index, (first_line, _) in enumerate(sequences):
            if index == sequence_index:
                return first_line + token_index
    return None


def load_data_crf_content(the_file, source=None):
    """``(x, f)`` of an unlabelled GROBID matrix given as a file object or any iterable of lines."""
    source = source_name(the_file, source)
    return _unlabelled_crf(decoded_lines(the_file, source), source)


def load_data_crf_string(crf_string, source="<string>"):
    """``(x, f)`` of an unlabelled GROBID matrix held in a string, as GROBID sends it for tagging.

    >>> x, f = load_data_crf_string("June june LINESTART\\n2005 2005 LINEEND\\n")
    >>> x[0], f[0]
    (['June', '2005'], [['june', 'LINESTART'], ['2005', 'LINEEND']])
    """
    return _unlabelled_crf(crf_string.split("\n"), source)
