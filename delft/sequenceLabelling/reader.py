"""Readers of sequence labelling data, with DeLFT's function names and return values.

Every reader returns numpy object arrays with one entry per sequence: ``x`` (the tokens), ``y`` (the IOB2
labels) and, for GROBID feature matrices, ``f`` (per token, the list of its feature strings). Malformed
input raises :class:`~delft.utilities.errors.DataFormatError` naming the file and the line.

GROBID feature matrix, one token per line, a blank (or whitespace-only) line between sequences::

    June june J Ju Jun June e ne une June LINESTART INITCAP NODIGIT 0 0 1 NOPUNCT I-<month>
    2005 2005 2 20 200 2005 5 05 005 2005 LINEEND NOCAPS ALLDIGIT 0 1 0 NOPUNCT I-<year>

>>> x, y, f = load_data_and_labels_crf_string("June a I-<month>\\n2005 b I-<year>\\n\\n5 c I-<day>\\n")
>>> x[0], y[0], f[0]
(['June', '2005'], ['B-<month>', 'B-<year>'], [['a'], ['b']])
"""
import gzip
import os
import xml.etree.ElementTree as ElementTree
import zlib

import numpy as np

from delft.utilities.errors import DataFormatError
from delft.utilities.Tokenizer import tokenizeAndFilterSimple

_GROBID_BEGIN = "I-"
_IOB_BEGIN = "B-"
_IOB_INSIDE = "I-"
_IOB_OUTSIDE = "O"
_GROBID_OUTSIDE = "<other>"
_BOM = "\ufeff"


def translate_grobid_label_to_iob(label):
    """A GROBID label in IOB2: ``I-<x>`` begins an entity, ``<x>`` continues it, ``...other>`` is outside.

    Labels in neither form pass through unchanged (as in DeLFT).

    >>> [translate_grobid_label_to_iob(l) for l in ["I-<day>", "<day>", "I-<other>", "<other>", "B-X"]]
    ['B-<day>', 'I-<day>', 'O', 'O', 'B-X']
    """
    if label.endswith("other>"):
        return _IOB_OUTSIDE
    if label.startswith(_GROBID_BEGIN):
        return _IOB_BEGIN + label[len(_GROBID_BEGIN):]
    if label.startswith("<"):
        return _IOB_INSIDE + label
    return label


def translate_iob_label_to_grobid(label):
    """An IOB2 label in GROBID form, as GROBID's ``DeLFTModel.delft2grobidLabel`` maps it.

    (GROBID's Java ``replace`` would also rewrite a second ``B-``/``I-`` inside the label; no GROBID label
    has one, so only the prefix is rewritten here.)

    >>> [translate_iob_label_to_grobid(l) for l in ["B-<day>", "I-<day>", "O", "<x>"]]
    ['I-<day>', '<day>', '<other>', '<x>']
    """
    if label == _IOB_OUTSIDE:
        return _GROBID_OUTSIDE
    if label.startswith(_IOB_BEGIN):
        return _GROBID_BEGIN + label[len(_IOB_BEGIN):]
    if label.startswith(_IOB_INSIDE):
        return label[len(_IOB_INSIDE):]
    return label


def iob1_to_iob2(labels):
    """IOB1 labels (``I-`` also begins an entity after ``O`` or another type) as IOB2; IOB2 is unchanged.

    >>> iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"])
    ['B-PER', 'I-PER', 'O', 'B-LOC', 'B-LOC', 'B-ORG']
    """
    converted = []
    previous = _IOB_OUTSIDE
    for label in labels:
        if label.startswith(_IOB_INSIDE) and previous[len(_IOB_INSIDE):] != label[len(_IOB_INSIDE):]:
            label = _IOB_BEGIN + label[len(_IOB_INSIDE):]
        converted.append(label)
        previous = label
    return converted


# ---------------------------------------------------------------------------------------------------
# Reading text line by line, with the line number of any decoding error.


def _object_array(items):
    """A 1-D object array of ``items``; ``np.asarray`` would make equal-length lists a 2-D array."""
    array = np.empty(len(items), dtype=object)
    for index, item in enumerate(items):
        array[index] = item
    return array


def _read_lines(path):
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


def _decoded_lines(lines, source):
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


def _source_name(file_or_lines, source):
    """The name to report errors under: the file object's own name unless the caller gave one."""
    if source is None:
        return str(getattr(file_or_lines, "name", "<content>"))
    return source


def _blank_lines_starting_with(lines, prefix):
    """``lines`` with those starting with ``prefix`` made blank, which keeps the line numbers right."""
    for line in lines:
        yield "" if line.startswith(prefix) else line


# ---------------------------------------------------------------------------------------------------
# Column files: GROBID feature matrices, CoNLL.


def _read_column_sequences(lines, source, min_columns):
    """All the sequences of :func:`_iter_column_sequences`, as a list."""
    return list(_iter_column_sequences(lines, source, min_columns))


def _iter_column_sequences(lines, source, min_columns):
    """Split whitespace-separated column lines into sequences of rows, checking the column counts.

    Blank or whitespace-only lines separate sequences. Splitting on whitespace also drops the ``\\r`` of
    CRLF line ends, so CRLF and LF files read the same. Yields ``(first_line_number, rows)`` pairs; the
    rows of a sequence are on consecutive lines.

    >>> list(_iter_column_sequences(["a 1 X", "b 2 Y\\r", " ", "c 3 Z"], "<doc>", 2))
    [(1, [['a', '1', 'X'], ['b', '2', 'Y']]), (4, [['c', '3', 'Z']])]
    """
    found = False
    rows = []
    first_line = width = None
    for line_number, line in enumerate(lines, start=1):
        if line_number == 1:
            line = line.lstrip(_BOM)
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


def _labelled_crf(lines, source):
    sequences = _read_column_sequences(lines, source, min_columns=2)
    x = [[row[0] for row in rows] for _, rows in sequences]
    y = [[translate_grobid_label_to_iob(row[-1]) for row in rows] for _, rows in sequences]
    f = [[row[1:-1] for row in rows] for _, rows in sequences]
    return _object_array(x), _object_array(y), _object_array(f)


def _unlabelled_crf(lines, source):
    return _unlabelled_columns([rows for _, rows in
                                _iter_column_sequences(lines, source, min_columns=1)])


def _unlabelled_columns(sequences):
    x = [[row[0] for row in rows] for rows in sequences]
    f = [[row[1:] for row in rows] for rows in sequences]
    return _object_array(x), _object_array(f)


def load_data_and_labels_crf_file(filepath):
    """Tokens, IOB2 labels and features ``(x, y, f)`` of a labelled GROBID matrix file (plain or ``.gz``).

    Each line is ``token feature_1 ... feature_n label``; ``f[i][j]`` is the feature list of token j.
    """
    return _labelled_crf(_read_lines(filepath), str(filepath))


def load_data_and_labels_crf_content(the_file, source=None):
    """``(x, y, f)`` of a labelled GROBID matrix given as a file object or any iterable of lines.

    Lines may be ``str`` or UTF-8 ``bytes``; ``source`` names the input in errors (default: the file's name).

    >>> x, y, f = load_data_and_labels_crf_content(["10 a I-<day>", "May b I-<month>"])
    >>> y[0]
    ['B-<day>', 'B-<month>']
    """
    source = _source_name(the_file, source)
    return _labelled_crf(_decoded_lines(the_file, source), source)


def load_data_and_labels_crf_string(crf_string, source="<string>"):
    """``(x, y, f)`` of a labelled GROBID matrix held in a string."""
    return _labelled_crf(crf_string.split("\n"), source)


def load_data_crf_file(filepath):
    """Tokens and features ``(x, f)`` of an unlabelled GROBID matrix file: every column after the token
    is a feature."""
    return _unlabelled_crf(_read_lines(filepath), str(filepath))


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
            for _, rows in _iter_column_sequences(_decoded_lines(stream, source), source, 1):
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
        for line in _decoded_lines(stream, str(filepath)):
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
        sequences = _iter_column_sequences(_decoded_lines(stream, source), source, 1)
        for index, (first_line, _) in enumerate(sequences):
            if index == sequence_index:
                return first_line + token_index
    return None


def load_data_crf_content(the_file, source=None):
    """``(x, f)`` of an unlabelled GROBID matrix given as a file object or any iterable of lines."""
    source = _source_name(the_file, source)
    return _unlabelled_crf(_decoded_lines(the_file, source), source)


def load_data_crf_string(crf_string, source="<string>"):
    """``(x, f)`` of an unlabelled GROBID matrix held in a string, as GROBID sends it for tagging.

    >>> x, f = load_data_crf_string("June june LINESTART\\n2005 2005 LINEEND\\n")
    >>> x[0], f[0]
    (['June', '2005'], [['june', 'LINESTART'], ['2005', 'LINEEND']])
    """
    return _unlabelled_crf(crf_string.split("\n"), source)


def load_data_and_labels_conll(filepath):
    """Tokens and IOB2 labels ``(x, y)`` of a CoNLL-2003 file: ``token ... label`` per line.

    ``-DOCSTART-`` lines are skipped and IOB1 labels converted to IOB2 (IOB2 files are read unchanged).
    """
    source = str(filepath)
    lines = _blank_lines_starting_with(_read_lines(filepath), "-DOCSTART-")
    sequences = _read_column_sequences(lines, source, min_columns=2)
    x = [[row[0] for row in rows] for _, rows in sequences]
    y = [iob1_to_iob2([row[-1] for row in rows]) for _, rows in sequences]
    return _object_array(x), _object_array(y)


# ---------------------------------------------------------------------------------------------------
# CoNLL-2012 (the OntoNotes 5.0 release as *_gold_conll files).

_CONLL2012_WORD = 3
_CONLL2012_NAMED_ENTITY = 10


def _brackets_to_iob2(tags, source, first_line):
    """CoNLL-2012 named entity brackets as IOB2: ``(PERSON*`` opens, ``*)`` closes, ``(DATE)`` is one token.

    >>> _brackets_to_iob2(["(PERSON*", "*)", "*", "(DATE)"], "<doc>", 1)
    ['B-PERSON', 'I-PERSON', 'O', 'B-DATE']
    """
    labels = []
    entity = opened_at = None
    for line_number, tag in enumerate(tags, start=first_line):
        if tag.startswith("("):
            if entity is not None:
                raise DataFormatError(source, line_number,
                                      f"entity opened while '{entity}' (line {opened_at}) is still open")
            entity, opened_at = tag[1:].rstrip("*)"), line_number
            labels.append(_IOB_BEGIN + entity)
        elif entity is not None:
            labels.append(_IOB_INSIDE + entity)
        elif tag.endswith(")"):
            raise DataFormatError(source, line_number, f"'{tag}' closes an entity that was never opened")
        else:
            labels.append(_IOB_OUTSIDE)
        if tag.endswith(")"):
            entity = None
    if entity is not None:
        raise DataFormatError(source, opened_at, f"entity '{entity}' is not closed before the sentence ends")
    return labels


def _conll2012_files(path):
    """``path`` itself when it is a file, else the ``*gold_conll`` files under it, in a stable order."""
    if not os.path.isdir(path):
        return [path]
    return sorted(os.path.join(folder, name)
                  for folder, _, names in os.walk(path) for name in names if name.endswith("gold_conll"))


def load_data_and_labels_ontonotes(path):
    """Tokens and IOB2 labels ``(x, y)`` of CoNLL-2012 files (the OntoNotes 5.0 ``*_gold_conll`` release).

    ``path`` is one file or a folder searched for ``*gold_conll`` files. Columns are ``document part
    index word pos parse lemma frameset sense speaker named_entity ...``; ``#begin``/``#end document``
    lines are skipped.
    """
    x, y = [], []
    for filepath in _conll2012_files(path):
        source = str(filepath)
        lines = _blank_lines_starting_with(_read_lines(filepath), "#")
        sequences = _read_column_sequences(lines, source, min_columns=_CONLL2012_NAMED_ENTITY + 1)
        for first_line, rows in sequences:
            x.append([row[_CONLL2012_WORD] for row in rows])
            y.append(_brackets_to_iob2([row[_CONLL2012_NAMED_ENTITY] for row in rows], source, first_line))
    if not x:
        raise DataFormatError(str(path), None, "empty: no *gold_conll file with a sentence found")
    return _object_array(x), _object_array(y)


# ---------------------------------------------------------------------------------------------------
# TEI XML with <rs type="..."> annotations.


def _local_name(tag):
    """``p`` for ``{http://www.tei-c.org/ns/1.0}p``: TEI files may or may not use the namespace."""
    return tag.rsplit("}", 1)[-1]


def _tei_segments(element, label, segments):
    """Append ``(text, label)`` for the content of ``element`` in document order.

    Text inside ``<rs type="T">`` gets label ``<T>`` (nested markup takes the outer ``rs``), ``<lb/>`` is a
    space, any other markup is transparent. Each ``rs`` is its own segment so that two adjacent entities
    of one type stay two entities.
    """
    if element.text:
        segments.append((element.text, label))
    for child in element:
        name = _local_name(child.tag)
        if name == "lb":
            segments.append((" ", label))
        elif name == "rs" and label is None:
            entity, entity_segments = f"<{child.get('type')}>", []
            _tei_segments(child, entity, entity_segments)
            segments.append(("".join(text for text, _ in entity_segments), entity))
        else:
            _tei_segments(child, label, segments)
        if child.tail:
            segments.append((child.tail, label))


def _tei_paragraph(paragraph, source, index):
    """Tokens and IOB2 labels of one ``<p>``; the text of each segment is tokenised on its own, so an
    entity boundary is always a token boundary (as in DeLFT)."""
    for rs in paragraph.iter():
        if _local_name(rs.tag) == "rs" and rs.get("type") is None:
            raise DataFormatError(source, None, f"<rs> without a type attribute in paragraph {index}")
    segments = []
    _tei_segments(paragraph, None, segments)
    tokens, labels = [], []
    for text, label in segments:
        segment_tokens = tokenizeAndFilterSimple(text)
        tokens.extend(segment_tokens)
        if label is None:
            labels.extend([_IOB_OUTSIDE] * len(segment_tokens))
        elif segment_tokens:
            labels.append(_IOB_BEGIN + label)
            labels.extend([_IOB_INSIDE + label] * (len(segment_tokens) - 1))
    return tokens, labels


def _tei_sequences(root, source):
    x, y = [], []
    paragraphs = [element for element in root.iter() if _local_name(element.tag) == "p"]
    for index, paragraph in enumerate(paragraphs, start=1):
        tokens, labels = _tei_paragraph(paragraph, source, index)
        # An empty paragraph would be a zero-length sequence, which no model can use.
        if tokens:
            x.append(tokens)
            y.append(labels)
    if not x:
        raise DataFormatError(source, None, "empty: no <p> with text found")
    return _object_array(x), _object_array(y)


def _parse_xml(parse, argument, source):
    try:
        return parse(argument)
    except ElementTree.ParseError as error:
        raise DataFormatError(source, error.position[0], f"malformed XML ({error})") from None


def load_data_and_labels_xml_file(filepath):
    """Tokens and IOB2 labels ``(x, y)`` of a TEI file: each ``<p>`` is a sequence, ``<rs type="T">``
    marks an entity labelled ``B-<T>``/``I-<T>`` (DeLFT's form), other text is ``O``.

    >>> x, y = load_data_and_labels_xml_string('<TEI><p>You <rs type="insult">big oaf</rs>!</p></TEI>')
    >>> x[0], y[0]
    (['You', 'big', 'oaf', '!'], ['O', 'B-<insult>', 'I-<insult>', 'O'])
    """
    source = str(filepath)
    return _tei_sequences(_parse_xml(ElementTree.parse, filepath, source).getroot(), source)


def load_data_and_labels_xml_string(xml_string, source="<string>"):
    """``(x, y)`` of a TEI document held in a string; see :func:`load_data_and_labels_xml_file`."""
    return _tei_sequences(_parse_xml(ElementTree.fromstring, xml_string, source), source)
