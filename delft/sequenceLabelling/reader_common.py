"""What the readers of every format share: labels (GROBID's, IOB1, IOB2), lines read with the
line number of any decoding error, and column files split into sequences."""
import gzip
import zlib

import numpy as np

from delft.utilities.errors import DataFormatError

GROBID_BEGIN = "I-"
IOB_BEGIN = "B-"
IOB_INSIDE = "I-"
IOB_OUTSIDE = "O"
GROBID_OUTSIDE = "<other>"
BOM = "\ufeff"


def translate_grobid_label_to_iob(label):
    """A GROBID label in IOB2: ``I-<x>`` begins an entity, ``<x>`` continues it, ``...other>`` is outside.

    Labels in neither form pass through unchanged (as in DeLFT).

    >>> [translate_grobid_label_to_iob(l) for l in ["I-<day>", "<day>", "I-<other>", "<other>", "B-X"]]
    ['B-<day>', 'I-<day>', 'O', 'O', 'B-X']
    """
    if label.endswith("other>"):
        return IOB_OUTSIDE
    if label.startswith(GROBID_BEGIN):
        return IOB_BEGIN + label[len(GROBID_BEGIN):]
    if label.startswith("<"):
        return IOB_INSIDE + label
    return label


def translate_iob_label_to_grobid(label):
    """An IOB2 label in GROBID form, as GROBID's ``DeLFTModel.delft2grobidLabel`` maps it.

    (GROBID's Java ``replace`` would also rewrite a second ``B-``/``I-`` inside the label; no GROBID label
    has one, so only the prefix is rewritten here.)

    >>> [translate_iob_label_to_grobid(l) for l in ["B-<day>", "I-<day>", "O", "<x>"]]
    ['I-<day>', '<day>', '<other>', '<x>']
    """
    if label == IOB_OUTSIDE:
        return GROBID_OUTSIDE
    if label.startswith(IOB_BEGIN):
        return GROBID_BEGIN + label[len(IOB_BEGIN):]
    if label.startswith(IOB_INSIDE):
        return label[len(IOB_INSIDE):]
    return label


def iob1_to_iob2(labels):
    """IOB1 labels (``I-`` also begins an entity after ``O`` or another type) as IOB2; IOB2 is unchanged.

    >>> iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"])
    ['B-PER', 'I-PER', 'O', 'B-LOC', 'B-LOC', 'B-ORG']
    """
    converted = []
    previous = IOB_OUTSIDE
    for label in labels:
        if label.startswith(IOB_INSIDE) and previous[len(IOB_INSIDE):] != label[len(IOB_INSIDE):]:
            label = IOB_BEGIN + label[len(IOB_INSIDE):]
        converted.append(label)
        previous = label
    return converted


def object_array(items):
    """A 1-D object array of ``items``; ``np.asarray`` would make equal-length lists a 2-D array."""
    array = np.empty(len(items), dtype=object)
    for index, item in enumerate(items):
        array[index] = item
    return array


def read_lines(path):
    """The lines of a UTF-8 file (gzipped when its name ends in ``.gz``), without their ``\\n``."""
    source = str(path)
    with open(path, "rb") as file:
        data = file.read()
    if source.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise DataFormatError(source, None, f"not a readable gzip file ({error})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        # Decoding the whole file at once is fast; the line is recovered from the byte offset.
        line_number = data.count(b"\n", 0, error.start) + 1
        raise DataFormatError(source, line_number,
                              f"not valid UTF-8 (byte 0x{data[error.start]:02x}: {error.reason})") from None
    return text.split("\n")


def decoded_lines(lines, source):
    """The lines of a file object or iterable as ``str``: ``bytes`` lines are decoded as strict UTF-8.

    A text stream decodes ahead of the line it hands out, so its error can only be placed at or after
    the line being read.
    """
    iterator = iter(lines)
    line_number = 0
    while True:
        try:
            line = next(iterator)
        except StopIteration:
            return
        except UnicodeDecodeError as error:
            raise DataFormatError(source, line_number + 1,
                                  f"not valid UTF-8 at or after this line ({error.reason})") from None
        line_number += 1
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DataFormatError(source, line_number, f"not valid UTF-8 ({error.reason})") from None
        yield line


def source_name(file_or_lines, source):
    """The name to report errors under: the file object's own name unless the caller gave one."""
    if source is None:
        return str(getattr(file_or_lines, "name", "<content>"))
    return source


def blank_lines_starting_with(lines, prefix):
    """``lines`` with those starting with ``prefix`` made blank, which keeps the line numbers right."""
    for line in lines:
        yield "" if line.startswith(prefix) else line


def read_column_sequences(lines, source, min_columns):
    """All the sequences of :func:`iter_column_sequences`, as a list."""
    return list(iter_column_sequences(lines, source, min_columns))


def iter_column_sequences(lines, source, min_columns):
    """Split whitespace-separated column lines into sequences of rows, checking the column counts.

    Blank or whitespace-only lines separate sequences. Splitting on whitespace also drops the ``\\r`` of
    CRLF line ends, so CRLF and LF files read the same. Yields ``(first_line_number, rows)`` pairs; the
    rows of a sequence are on consecutive lines.

    >>> list(iter_column_sequences(["a 1 X", "b 2 Y\\r", " ", "c 3 Z"], "<doc>", 2))
    [(1, [['a', '1', 'X'], ['b', '2', 'Y']]), (4, [['c', '3', 'Z']])]
    """
    found = False
    rows = []
    first_line = width = None
    for line_number, line in enumerate(lines, start=1):
        if line_number == 1:
            line = line.lstrip(BOM)
        columns = line.split()
        if not columns:
            if rows:
                found = True
                yield first_line, rows
                rows = []
            continue
        if not rows:
            first_line, width = line_number, len(columns)
            if width < min_columns:
                raise DataFormatError(source, line_number,
                                      f"{width} column(s) where at least {min_columns} are expected "
                                      f"(is the label column missing?)")
        elif len(columns) != width:
            raise DataFormatError(source, line_number,
                                  f"{len(columns)} columns, but the sequence starting at line "
                                  f"{first_line} has {width}")
        rows.append(columns)
    if rows:
        yield first_line, rows
    elif not found:
        raise DataFormatError(source, None, "empty: no sequence found")
