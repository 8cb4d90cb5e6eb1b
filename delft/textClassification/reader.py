"""Readers of text classification data: a user's CSV, and the data of DeLFT's two applications.

Each reader returns ``(texts, labels)``, two lists of strings (a label is a class name); ``one_hot``
turns the labels into a classifier's targets. Files are read as UTF-8 (plain, or gzipped when the
name ends in ``.gz``); malformed input raises :class:`~delft.utilities.errors.DataFormatError`,
one line naming the file and the line (``data.csv:7: ...``), and a missing file the usual
``FileNotFoundError``.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "data.csv")
>>> _ = open(path, "w").write('text,label\\n"Hello, world",greeting\\nBye,farewell\\n')
>>> texts, labels = read_labelled_csv(path, ["greeting", "farewell"], "text", "label", header=True)
>>> texts, labels
(['Hello, world', 'Bye'], ['greeting', 'farewell'])
>>> one_hot(labels, ["greeting", "farewell"]).tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""
import csv
import logging

import numpy as np

from delft.sequenceLabelling.reader_common import BOM, read_lines
from delft.utilities.errors import ConfigurationError, DataFormatError

logger = logging.getLogger(__name__)

#: The classes of GROBID's copyright model (who owns the copyright), in DeLFT's order.
COPYRIGHT_CLASSES = ["publisher", "authors", "undecided"]
#: The classes of GROBID's license model, in DeLFT's order.
LICENSE_CLASSES = ["CC-0", "CC-BY", "CC-BY-NC", "CC-BY-NC-ND", "CC-BY-SA", "CC-BY-NC-SA",
                   "CC-BY-ND", "copyright", "other", "undecided"]
#: The classes of the citation sentiment corpus, in DeLFT's order.
CITATION_CLASSES = ["negative", "neutral", "positive"]
#: The citation corpus's sentiment letters and their classes.
CITATION_SENTIMENTS = {"n": "negative", "o": "neutral", "p": "positive"}
#: The column of each task of the licences csv (column 0 is the text).
LICENSE_TASKS = {"copyright": (1, COPYRIGHT_CLASSES), "license": (2, LICENSE_CLASSES)}


def read_labelled_csv(path, classes, text_column=0, label_column=1, header=False):
    """The texts and labels of a CSV file, one labelled text a row.

    Args:
        path: the CSV file (comma-separated, ``"``-quoted as Python's ``csv`` module and
            spreadsheets write it; a quoted text may hold commas and newlines).
        classes: the class names a label may take.
        text_column, label_column: the text's and the label's column: an index from 0, or with
            ``header`` a name of the header row.
        header: whether the first row names the columns (it is then no data).

    Returns:
        ``(texts, labels)``: lists of strings, in the file's order; texts as written, labels with
        their surrounding whitespace removed.

    Every row has as many columns as the first one. Blank lines, and rows whose cells are all
    blank, are skipped. A row with an empty label cell is skipped too, as DeLFT drops its
    ``MISSINGVALUE`` labels: one warning counts them and names their first lines. A row with too
    few or too many columns, an empty text, a label not in ``classes``, a column that is not
    there, quoting the csv module rejects, or no labelled row at all: ``DataFormatError``
    naming the file and the line where the row starts.
    """
    classes = _checked_classes(classes)
    if not header and not all(isinstance(c, int) for c in (text_column, label_column)):
        raise ConfigurationError("text_column and label_column must be column indices when the "
                                 "file has no header row (header=False)")
    if text_column == label_column:
        raise ConfigurationError(f"the text and the label are both column {text_column!r}")
    source = str(path)
    texts, labels, unlabelled = [], [], []
    columns = width = None
    for line_number, row in _rows(path, source):
        if width is None:
            width = len(row)
            columns = _column_indices(row if header else None, width, text_column, label_column,
                                      source, line_number)
            if header:
                continue
        if len(row) != width:
            raise DataFormatError(source, line_number, f"{len(row)} column(s) where the first row has "
                                                       f"{width}: is a comma of the text unquoted?")
        text, label = row[columns[0]], row[columns[1]].strip()
        if not text.strip():
            raise DataFormatError(source, line_number, f"empty text (column {columns[0]})")
        if not label:
            unlabelled.append(line_number)
            continue
        if label not in classes:
            raise DataFormatError(source, line_number, f"label {label!r} is not one of the classes "
                                                       f"({', '.join(classes)})")
        texts.append(text)
        labels.append(label)
    if unlabelled:
        logger.warning("%s: %d row(s) without a label skipped (line %s)", source, len(unlabelled),
                       ", ".join(map(str, unlabelled[:5])) + (", ..." if len(unlabelled) > 5 else ""))
    if not texts:
        raise DataFormatError(source, None, "empty: no labelled row found")
    return texts, labels


def read_license_data(path, task):
    """The texts and one task's labels of GROBID's licences data
    (``copyrights-licenses-data-validated.csv``: text, copyright owner, license; no header row).

    Args:
        path: the csv file.
        task: ``"copyright"`` (labels of :data:`COPYRIGHT_CLASSES`) or ``"license"``
            (:data:`LICENSE_CLASSES`).

    Returns:
        ``(texts, labels)`` as :func:`read_labelled_csv`. Every record is data: DeLFT's pandas
        reader takes the first one for a header and so trains on one record fewer.
    """
    if task not in LICENSE_TASKS:
        raise ConfigurationError(f"unknown task {task!r}: copyright or license")
    column, classes = LICENSE_TASKS[task]
    return read_labelled_csv(path, classes, text_column=0, label_column=column, header=False)


def read_citation_sentiment(path):
    """The texts and sentiment labels of the citation sentiment corpus
    (``citation_sentiment_corpus.txt``, Athar 2011).

    One citation a line, 4 tab-separated fields: source paper, target paper, sentiment
    (``n``, ``o`` or ``p``: :data:`CITATION_SENTIMENTS`) and the citation text; blank lines and
    lines starting with ``#`` are skipped, and each line's surrounding whitespace is removed (as
    DeLFT does).

    Returns:
        ``(texts, labels)``, labels of :data:`CITATION_CLASSES`. A text's surrounding double
        quotes are removed when it has both (DeLFT cuts the first and last character of every
        text, letters of the unquoted ones included); doubled quotes inside are kept as written.

    A line without exactly 4 fields, with another sentiment, or with an empty text is a
    ``DataFormatError`` naming the file and the line, as a malformed line of a sequence
    labelling file is (DeLFT prints a warning and skips it).
    """
    source = str(path)
    texts, labels = [], []
    for line_number, line in enumerate(read_lines(path), start=1):
        line = (line.lstrip(BOM) if line_number == 1 else line).strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 4:
            raise DataFormatError(source, line_number,
                                  f"{len(fields)} tab-separated field(s) where 4 are expected "
                                  f"(source paper, target paper, sentiment, text)")
        sentiment, text = fields[2], fields[3]
        if sentiment not in CITATION_SENTIMENTS:
            raise DataFormatError(source, line_number, f"sentiment {sentiment!r} is not one of "
                                                       f"{', '.join(CITATION_SENTIMENTS)}")
        if len(text) > 1 and text[0] == text[-1] == '"':
            text = text[1:-1]
        if not text.strip():
            raise DataFormatError(source, line_number, "empty text (field 4)")
        texts.append(text)
        labels.append(CITATION_SENTIMENTS[sentiment])
    if not texts:
        raise DataFormatError(source, None, "empty: no citation found")
    return texts, labels


def one_hot(labels, classes):
    """The one-hot float32 matrix ``[len(labels), len(classes)]`` of ``labels`` over ``classes``.

    >>> one_hot(["b", "a", "b"], ["a", "b", "c"]).tolist()
    [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    classes = _checked_classes(classes)
    index = {name: position for position, name in enumerate(classes)}
    matrix = np.zeros((len(labels), len(classes)), dtype=np.float32)
    for row, label in enumerate(labels):
        if label not in index:
            raise ValueError(f"label {label!r} (number {row}) is not one of the classes "
                             f"({', '.join(map(str, classes))})")
        matrix[row, index[label]] = 1.0
    return matrix


def load_citation_sentiment_corpus(filepath):
    """DeLFT's name and return values: the texts as an array and their one-hot labels over
    :data:`CITATION_CLASSES` (read by :func:`read_citation_sentiment`, quotes removed only when
    present)."""
    texts, labels = read_citation_sentiment(filepath)
    return np.asarray(texts, dtype=object), one_hot(labels, CITATION_CLASSES)


def _checked_classes(classes):
    classes = list(classes)
    if not classes or not all(isinstance(name, str) and name for name in classes):
        raise ConfigurationError(f"classes must be non-empty strings, not {classes!r}")
    if len(set(classes)) != len(classes):
        raise ConfigurationError(f"classes named twice in {classes!r}")
    return classes


def _rows(path, source):
    """``(line_number, row)`` of each record of a CSV file that is not blank, the line being where
    the record starts (a quoted field may go on over several lines)."""
    lines = read_lines(path)
    if lines:
        lines[0] = lines[0].lstrip(BOM)
    reader = csv.reader((line + "\n" for line in lines), strict=True)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise DataFormatError(source, start, f"not readable as CSV ({error})") from None
        if any(cell.strip() for cell in row):
            yield start, row
        start = reader.line_num + 1


def _column_indices(header_row, width, text_column, label_column, source, line_number):
    """The indices of the text and label columns, checked against the first row."""
    indices = []
    for role, column in (("text", text_column), ("label", label_column)):
        if isinstance(column, str):
            if column not in header_row:
                raise DataFormatError(source, line_number,
                                      f"no {role} column {column!r} in the header (its columns: "
                                      f"{', '.join(header_row)})")
            column = header_row.index(column)
        elif not isinstance(column, int) or isinstance(column, bool) or column < 0:
            raise ConfigurationError(f"{role}_column must be a column index (>= 0) or a header "
                                     f"name, not {column!r}")
        elif column >= width:
            raise DataFormatError(source, line_number,
                                  f"no {role} column {column}: the first row has {width} column(s)")
        indices.append(column)
    if indices[0] == indices[1]:
        raise ConfigurationError(f"the text and the label are both column {indices[0]}")
    return indices
