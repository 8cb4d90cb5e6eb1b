"""Readers of CoNLL data: CoNLL-2003 files, and CoNLL-2012 (the OntoNotes 5.0 release as
``*_gold_conll`` files). Import them from ``delft.sequenceLabelling.reader``, DeLFT's module."""
import os

from delft.sequenceLabelling.reader_common import (IOB_BEGIN, IOB_INSIDE, IOB_OUTSIDE,
                                                   blank_lines_starting_with, iob1_to_iob2,
                                                   object_array, read_column_sequences, read_lines)
from delft.utilities.errors import DataFormatError

_CONLL2012_WORD = 3
_CONLL2012_NAMED_ENTITY = 10


def load_data_and_labels_conll(filepath):
    """Tokens and IOB2 labels ``(x, y)`` of a CoNLL-2003 file: ``token ... label`` per line.

    ``-DOCSTART-`` lines are skipped and IOB1 labels converted to IOB2 (IOB2 files are read unchanged).
    """
    source = str(filepath)
    lines = blank_lines_starting_with(read_lines(filepath), "-DOCSTART-")
    sequences = read_column_sequences(lines, source, min_columns=2)
    x = [[row[0] for row in rows] for _, rows in sequences]
    y = [iob1_to_iob2([row[-1] for row in rows]) for _, rows in sequences]
    return object_array(x), object_array(y)


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
            labels.append(IOB_BEGIN + entity)
        elif entity is not None:
            labels.append(IOB_INSIDE + entity)
        elif tag.endswith(")"):
            raise DataFormatError(source, line_number, f"'{tag}' closes an entity that was never opened")
        else:
            labels.append(IOB_OUTSIDE)
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
        lines = blank_lines_starting_with(read_lines(filepath), "#")
        sequences = read_column_sequences(lines, source, min_columns=_CONLL2012_NAMED_ENTITY + 1)
        for first_line, rows in sequences:
            x.append([row[_CONLL2012_WORD] for row in rows])
            y.append(_brackets_to_iob2([row[_CONLL2012_NAMED_ENTITY] for row in rows], source, first_line))
    if not x:
        raise DataFormatError(str(path), None, "empty: no *gold_conll file with a sentence found")
    return object_array(x), object_array(y)
