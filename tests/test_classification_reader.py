"""The text classification readers on tiny files (every error: its one line, file and line) and
on the shared data (the licences csv and the citation sentiment corpus) when it is there."""
import collections
import gzip
import logging

import numpy as np
import pytest

from delft.textClassification.reader import (
    CITATION_CLASSES, COPYRIGHT_CLASSES, LICENSE_CLASSES, load_citation_sentiment_corpus, one_hot,
    read_citation_sentiment, read_labelled_csv, read_license_data)
from delft.utilities.data_path import shared_data_file
from delft.utilities.errors import ConfigurationError, DataFormatError

LICENCES = shared_data_file("textClassification", "licenses", "copyrights-licenses-data-validated.csv")
CITATIONS = shared_data_file("textClassification", "citations", "citation_sentiment_corpus.txt")
AB = ["a", "b"]


def write(tmp_path, content, name="data.csv"):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def format_error(call, path, line_number):
    """The DataFormatError of ``call()``, checked to be one line naming ``path`` and the line."""
    with pytest.raises(DataFormatError) as caught:
        call()
    error = caught.value
    assert (error.source, error.line_number) == (str(path), line_number)
    assert "\n" not in str(error)
    assert str(error).startswith(f"{path}:{line_number}: " if line_number else f"{path}: ")
    return error.reason


# ---- read_labelled_csv


def test_rows_in_order_texts_as_written_labels_stripped(tmp_path):
    path = write(tmp_path, ' one ,a\ntwo, b \n"three, with a comma",a\n')
    assert read_labelled_csv(path, AB) == ([" one ", "two", "three, with a comma"], ["a", "b", "a"])


def test_columns_by_index_or_by_header_name(tmp_path):
    path = write(tmp_path, "id,label,text\n1,b,first\n2,a,second\n")
    expected = (["first", "second"], ["b", "a"])
    assert read_labelled_csv(path, AB, "text", "label", header=True) == expected
    assert read_labelled_csv(path, AB, 2, 1, header=True) == expected
    assert read_labelled_csv(path, AB, "text", 1, header=True) == expected


def test_quoted_newlines_crlf_bom_and_gzip_read_the_same(tmp_path):
    content = '\ufefftext,label\n"two\nlines",a\n"say ""hi""",b\n'
    expected = (["two\nlines", 'say "hi"'], AB)
    assert read_labelled_csv(write(tmp_path, content), AB, header=True) == expected
    crlf = write(tmp_path, content.replace("\n", "\r\n"), "crlf.csv")
    assert read_labelled_csv(crlf, AB, header=True) == (["two\r\nlines", 'say "hi"'], AB)
    packed = tmp_path / "data.csv.gz"
    packed.write_bytes(gzip.compress(content.encode("utf-8")))
    assert read_labelled_csv(packed, AB, header=True) == expected


def test_blank_lines_and_blank_rows_are_skipped(tmp_path):
    path = write(tmp_path, "\nx,a\n\n , \n,\ny,b\n\n")
    assert read_labelled_csv(path, AB) == (["x", "y"], AB)


def test_rows_without_a_label_are_skipped_with_one_counted_warning(tmp_path, caplog):
    path = write(tmp_path, "x,a\ny,\nz, \nw,b\n")
    with caplog.at_level(logging.WARNING, logger="delft.textClassification.reader"):
        assert read_labelled_csv(path, AB) == (["x", "w"], AB)
    assert caplog.messages == [f"{path}: 2 row(s) without a label skipped (line 2, 3)"]
    caplog.clear()
    many = write(tmp_path, "".join(f"t{i},\n" for i in range(7)) + "x,a\n", "many.csv")
    with caplog.at_level(logging.WARNING, logger="delft.textClassification.reader"):
        read_labelled_csv(many, AB)
    assert caplog.messages == [f"{many}: 7 row(s) without a label skipped (line 1, 2, 3, 4, 5, ...)"]


@pytest.mark.parametrize("content, line_number, reason", [
    ("x,a\ny\n", 2, "1 column(s) where the first row has 2: is a comma of the text unquoted?"),
    ("x,a\ny,b,c\n", 2, "3 column(s) where the first row has 2: is a comma of the text unquoted?"),
    ('"multi\nline",a\n"two\nlines",b\n3\n', 5, "1 column(s) where the first row has 2: "
                                               "is a comma of the text unquoted?"),
    ("x,a\n ,b\n", 2, "empty text (column 0)"),
    ("x,a\n,b\n", 2, "empty text (column 0)"),
    ("x,a\ny,c\n", 2, "label 'c' is not one of the classes (a, b)"),
    ("x,a\ny,A\n", 2, "label 'A' is not one of the classes (a, b)"),
    ("x\ny\n", 1, "no label column 1: the first row has 1 column(s)"),
    ('x,a\n"open,b\ny,a\n', 2, "not readable as CSV (unexpected end of data)"),
    ('x,a\n"quoted" after,b\n', 2, "not readable as CSV (',' expected after '\"')"),
    ("", None, "empty: no labelled row found"),
    ("\n\n", None, "empty: no labelled row found"),
    ("x,\ny,\n", None, "empty: no labelled row found"),
    (b"x,a\ny\xe9,b\n", 2, "not valid UTF-8 (byte 0xe9: invalid continuation byte)"),
], ids=["too few columns", "too many columns", "after multi-line records", "blank text",
        "empty text", "unknown label", "label case", "label column beyond the row",
        "unclosed quote", "text after a quote", "empty file", "blank lines only",
        "no label at all", "latin-1"])
def test_each_error_is_one_line_naming_file_and_line(tmp_path, content, line_number, reason):
    path = write(tmp_path, content)
    assert format_error(lambda: read_labelled_csv(path, AB), path, line_number) == reason


@pytest.mark.parametrize("content, columns, line_number, reason", [
    ("text,class\nx,a\n", ("text", "label"), 1,
     "no label column 'label' in the header (its columns: text, class)"),
    ("body,label\nx,a\n", ("text", "label"), 1,
     "no text column 'text' in the header (its columns: body, label)"),
    ("text,label\nx,a\n", ("text", 5), 1, "no label column 5: the first row has 2 column(s)"),
    ("text,label\nx\n", ("text", "label"), 2,
     "1 column(s) where the first row has 2: is a comma of the text unquoted?"),
    ("text,label\n", ("text", "label"), None, "empty: no labelled row found"),
])
def test_header_errors(tmp_path, content, columns, line_number, reason):
    path = write(tmp_path, content)
    call = lambda: read_labelled_csv(path, AB, *columns, header=True)  # noqa: E731
    assert format_error(call, path, line_number) == reason


@pytest.mark.parametrize("arguments, message", [
    (dict(classes=[]), "classes must be non-empty strings, not []"),
    (dict(classes=["a", ""]), "classes must be non-empty strings, not ['a', '']"),
    (dict(classes=["a", 1]), "classes must be non-empty strings, not ['a', 1]"),
    (dict(classes=["a", "a"]), "classes named twice in ['a', 'a']"),
    (dict(classes=AB, text_column="text"), "text_column and label_column must be column indices "
                                           "when the file has no header row (header=False)"),
    (dict(classes=AB, label_column=0), "the text and the label are both column 0"),
    (dict(classes=AB, text_column=-1), "text_column must be a column index (>= 0) or a header "
                                       "name, not -1"),
    (dict(classes=AB, label_column=True), "label_column must be a column index (>= 0) or a "
                                          "header name, not True"),
    (dict(classes=AB, text_column="x", label_column=0, header=True),
     "the text and the label are both column 0"),
])
def test_arguments_that_cannot_work_are_one_line(tmp_path, arguments, message):
    path = write(tmp_path, "x,a\ny,b\n")
    with pytest.raises(ConfigurationError) as caught:
        read_labelled_csv(path, **arguments)
    assert str(caught.value) == message


def test_a_missing_file_or_a_folder_is_the_usual_os_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.csv"):
        read_labelled_csv(tmp_path / "absent.csv", AB)
    with pytest.raises(IsADirectoryError):
        read_labelled_csv(tmp_path, AB)


# ---- read_license_data


LICENCE_ROWS = ('"First record, never a header",undecided,CC-BY\n'
                '"© 2001 Elsevier",publisher,copyright\n'
                'Authors keep it,authors,CC-BY-NC-SA\n')


def test_licence_data_keeps_its_first_record_for_either_task(tmp_path):
    path = write(tmp_path, LICENCE_ROWS)
    texts = ["First record, never a header", "© 2001 Elsevier", "Authors keep it"]
    assert read_license_data(path, "copyright") == (texts, ["undecided", "publisher", "authors"])
    assert read_license_data(path, "license") == (texts, ["CC-BY", "copyright", "CC-BY-NC-SA"])


def test_licence_data_errors(tmp_path):
    path = write(tmp_path, LICENCE_ROWS + "x,owner,CC-BY\n")
    assert format_error(lambda: read_license_data(path, "copyright"), path, 4) == (
        "label 'owner' is not one of the classes (publisher, authors, undecided)")
    assert read_license_data(path, "license")[1][-1] == "CC-BY"
    with pytest.raises(ConfigurationError, match=r"^unknown task 'licence': copyright or license$"):
        read_license_data(path, "licence")


def test_the_class_lists_are_delfts():
    assert COPYRIGHT_CLASSES == ["publisher", "authors", "undecided"]
    assert LICENSE_CLASSES == ["CC-0", "CC-BY", "CC-BY-NC", "CC-BY-NC-ND", "CC-BY-SA", "CC-BY-NC-SA",
                               "CC-BY-ND", "copyright", "other", "undecided"]
    assert CITATION_CLASSES == ["negative", "neutral", "positive"]


def test_the_shared_licence_data():
    if not LICENCES.is_file():
        pytest.skip(f"shared licences data absent ({LICENCES}); set DELFT_SHARED_DATA")
    texts, owners = read_license_data(LICENCES, "copyright")
    same_texts, licences = read_license_data(LICENCES, "license")
    assert len(texts) == 863 and same_texts == texts
    assert texts[0].startswith("Content from this work may be used under the terms of the Creative")
    assert collections.Counter(owners) == {"authors": 317, "publisher": 303, "undecided": 243}
    assert collections.Counter(licences) == {
        "undecided": 288, "CC-BY": 246, "copyright": 103, "CC-BY-NC-ND": 100, "CC-BY-SA": 42,
        "CC-BY-NC": 34, "CC-BY-NC-SA": 30, "CC-BY-ND": 16, "other": 4}  # no CC-0
    assert sum(any(ord(c) > 127 for c in text) for text in texts) == 624


# ---- read_citation_sentiment


CITATION_LINES = ("# comment\n"
                  "\n"
                  'A00-1\tB00-2\to\t"Quoted text (Smith, 2000)."\n'
                  "A00-1\tB00-3\tp\tUnquoted text keeps its letters.\n"
                  '  A00-1\tB00-4\tn\t"Doubled ""quotes"" kept"  \n'
                  "   # an indented comment\n"
                  'A00-1\tB00-5\to\t"half quoted\n')


def test_citations_quotes_removed_only_in_pairs(tmp_path):
    path = write(tmp_path, CITATION_LINES, "citations.txt")
    assert read_citation_sentiment(path) == (
        ["Quoted text (Smith, 2000).", "Unquoted text keeps its letters.", 'Doubled ""quotes"" kept',
         '"half quoted'], ["neutral", "positive", "negative", "neutral"])


def test_citations_crlf_bom_and_gzip_read_the_same(tmp_path):
    expected = read_citation_sentiment(write(tmp_path, CITATION_LINES, "citations.txt"))
    crlf = write(tmp_path, "\ufeff" + CITATION_LINES.replace("\n", "\r\n"), "crlf.txt")
    assert read_citation_sentiment(crlf) == expected
    packed = tmp_path / "citations.txt.gz"
    packed.write_bytes(gzip.compress(CITATION_LINES.encode("utf-8")))
    assert read_citation_sentiment(packed) == expected


@pytest.mark.parametrize("line, reason", [
    ("A\tB\to", "3 tab-separated field(s) where 4 are expected (source paper, target paper, "
                "sentiment, text)"),
    ("A\tB\to\ttext\textra", "5 tab-separated field(s) where 4 are expected (source paper, "
                             "target paper, sentiment, text)"),
    ("A B o text", "1 tab-separated field(s) where 4 are expected (source paper, target paper, "
                   "sentiment, text)"),
    ("A\tB\tx\ttext", "sentiment 'x' is not one of n, o, p"),
    ("A\tB\tneutral\ttext", "sentiment 'neutral' is not one of n, o, p"),
    ('A\tB\to\t""', "empty text (field 4)"),
    ('A\tB\to\t" "', "empty text (field 4)"),
    # the line's surrounding whitespace goes first (as in DeLFT): an empty last field with it
    ("A\tB\to\t\t", "3 tab-separated field(s) where 4 are expected (source paper, target paper, "
                    "sentiment, text)"),
])
def test_citation_errors_name_file_and_line(tmp_path, line, reason):
    path = write(tmp_path, CITATION_LINES + line + "\nA\tB\to\tfine\n", "citations.txt")
    assert format_error(lambda: read_citation_sentiment(path), path, 8) == reason


@pytest.mark.parametrize("content, line_number, reason", [
    ("# only\n\n#comments\n", None, "empty: no citation found"),
    ("", None, "empty: no citation found"),
    (b"A\tB\to\tok\nA\tB\to\tcaf\xe9\n", 2, "not valid UTF-8 (byte 0xe9: invalid continuation byte)"),
])
def test_citation_file_errors(tmp_path, content, line_number, reason):
    path = write(tmp_path, content, "citations.txt")
    assert format_error(lambda: read_citation_sentiment(path), path, line_number) == reason
    with pytest.raises(FileNotFoundError):
        read_citation_sentiment(tmp_path / "absent.txt")


def test_the_shared_citation_corpus():
    if not CITATIONS.is_file():
        pytest.skip(f"shared citation corpus absent ({CITATIONS}); set DELFT_SHARED_DATA")
    texts, labels = read_citation_sentiment(CITATIONS)
    assert len(texts) == 8736
    assert collections.Counter(labels) == {"neutral": 7627, "positive": 829, "negative": 280}
    raw = [line.strip().split("\t")[3] for line in CITATIONS.read_text(encoding="utf-8").split("\n")
           if line.strip() and not line.startswith("#")]
    quoted = [field.startswith('"') for field in raw]
    assert sum(quoted) == 8143  # the 593 others DeLFT cuts a letter and the last character off
    assert [text for text, field, q in zip(texts, raw, quoted) if not q] == [
        field for field, q in zip(raw, quoted) if not q]
    assert all(text == field[1:-1] for text, field, q in zip(texts, raw, quoted) if q)
    assert sum('""' in text for text in texts) == 96


# ---- one_hot and DeLFT's name


def test_one_hot():
    matrix = one_hot(["positive", "negative", "positive"], CITATION_CLASSES)
    assert matrix.dtype == np.float32 and matrix.shape == (3, 3)
    assert matrix.tolist() == [[0, 0, 1], [1, 0, 0], [0, 0, 1]]
    assert one_hot([], AB).shape == (0, 2)
    with pytest.raises(ValueError, match=r"^label 'c' \(number 1\) is not one of the classes \(a, b\)$"):
        one_hot(["a", "c"], AB)
    with pytest.raises(ConfigurationError, match="classes named twice"):
        one_hot(["a"], ["a", "a"])


def test_delfts_citation_reader_name_gives_arrays(tmp_path):
    path = write(tmp_path, CITATION_LINES, "citations.txt")
    texts, targets = load_citation_sentiment_corpus(str(path))
    assert isinstance(texts, np.ndarray) and texts.tolist() == read_citation_sentiment(path)[0]
    assert targets.tolist() == [[0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]]
