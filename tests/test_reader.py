"""Tests of the data readers: GROBID feature matrices, CoNLL, CoNLL-2012 and TEI, good input and bad."""
import gzip
import io
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

from delft.sequenceLabelling import reader
from delft.sequenceLabelling.reader import (iob1_to_iob2, load_data_and_labels_conll,
                                            load_data_and_labels_crf_content,
                                            load_data_and_labels_crf_file,
                                            load_data_and_labels_crf_string,
                                            load_data_and_labels_ontonotes,
                                            load_data_and_labels_xml_file,
                                            load_data_and_labels_xml_string, load_data_crf_content,
                                            load_data_crf_file, load_data_crf_string,
                                            translate_grobid_label_to_iob,
                                            translate_iob_label_to_grobid)
from delft.utilities.data_path import shared_data_file
from delft.utilities.errors import DataFormatError
from delft.utilities.Tokenizer import tokenizeAndFilterSimple

# Two sequences, separated like GROBID's files by an empty line and a line holding one space.
LABELLED = (
    "Received received LINESTART NOCAPS I-<other>\n"
    ": : LINEIN ALLCAP <other>\n"
    "June june LINEIN INITCAP I-<month>\n"
    "2005 2005 LINEEND NOCAPS I-<year>\n"
    "\n"
    " \n"
    "10 10 LINESTART NOCAPS I-<day>\n"
    "th th LINEIN NOCAPS <day>\n"
    "May may LINEEND INITCAP I-<month>\n"
)
LABELLED_X = [["Received", ":", "June", "2005"], ["10", "th", "May"]]
LABELLED_Y = [["O", "O", "B-<month>", "B-<year>"], ["B-<day>", "I-<day>", "B-<month>"]]
LABELLED_F = [[["received", "LINESTART", "NOCAPS"], [":", "LINEIN", "ALLCAP"], ["june", "LINEIN", "INITCAP"],
               ["2005", "LINEEND", "NOCAPS"]],
              [["10", "LINESTART", "NOCAPS"], ["th", "LINEIN", "NOCAPS"], ["may", "LINEEND", "INITCAP"]]]
# The same matrix as GROBID sends it for tagging: no label column.
UNLABELLED = "".join(" ".join(line.split()[:-1]) + "\n" for line in LABELLED.splitlines())

DATE_TRAIN = ("sequenceLabelling", "grobid", "date", "date-220311.train")
GROBID_TRAIN = {
    # file: sequences, tokens, feature columns
    DATE_TRAIN: (637, 2510, 16),
    ("sequenceLabelling", "grobid", "name-header", "name-header-251225.train"): (1450, 25694, 19),
    ("sequenceLabelling", "grobid", "name-citation", "name-citation-251225.train"): (448, 5888, 19),
    ("sequenceLabelling", "grobid", "affiliation-address", "affiliation-address-251225.train"):
        (1238, 41437, 20),
}
TOXIC_TRAIN = ("sequenceLabelling", "toxic", "train.xml")


def real_file(parts):
    path = shared_data_file(*parts)
    if not path.exists():
        pytest.skip(f"shared data file {path} is absent")
    return path


def write(path, data, compress=False):
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)
    return path


def as_lists(array):
    assert isinstance(array, np.ndarray) and array.dtype == object and array.ndim == 1
    return list(array)


def assert_labelled(result, x=LABELLED_X, y=LABELLED_Y, f=LABELLED_F):
    assert [as_lists(array) for array in result] == [x, y, f]


# ----------------------------------------------------------------------------- labels

@pytest.mark.parametrize("grobid, iob", [
    ("I-<date>", "B-<date>"), ("<date>", "I-<date>"), ("I-<other>", "O"), ("<other>", "O"),
    ("I-<institution>", "B-<institution>"), ("<postCode>", "I-<postCode>"),
])
def test_grobid_label_to_iob(grobid, iob):
    assert translate_grobid_label_to_iob(grobid) == iob


@pytest.mark.parametrize("iob, grobid", [
    ("B-<date>", "I-<date>"), ("I-<date>", "<date>"), ("O", "<other>"), ("B-<other>", "I-<other>"),
])
def test_iob_label_to_grobid(iob, grobid):
    assert translate_iob_label_to_grobid(iob) == grobid


@pytest.mark.parametrize("label", ["PER", "x", "", "B", "other"])
def test_labels_in_neither_form_pass_through(label):
    assert translate_grobid_label_to_iob(label) == label
    assert translate_iob_label_to_grobid(label) == label


def test_iob1_to_iob2():
    assert iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC", "I-ORG", "B-ORG", "I-ORG"]) == \
        ["B-PER", "I-PER", "O", "B-LOC", "B-ORG", "B-ORG", "I-ORG"]
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]
    assert iob1_to_iob2(iob2) == iob2


# ----------------------------------------------------------------------------- GROBID matrices

def test_crf_string():
    assert_labelled(load_data_and_labels_crf_string(LABELLED))


@pytest.mark.parametrize("make_lines", [
    lambda: LABELLED.splitlines(),
    lambda: LABELLED.splitlines(keepends=True),
    lambda: [line.encode("utf-8") for line in LABELLED.splitlines(keepends=True)],
    lambda: io.StringIO(LABELLED),
    lambda: io.BytesIO(LABELLED.encode("utf-8")),
], ids=["str lines", "str lines with newline", "bytes lines", "text stream", "binary stream"])
def test_crf_content(make_lines):
    assert_labelled(load_data_and_labels_crf_content(make_lines()))


@pytest.mark.parametrize("name, compress", [("a.train", False), ("a.train.gz", True)])
def test_crf_file(tmp_path, name, compress):
    path = write(tmp_path / name, LABELLED.encode("utf-8"), compress)
    assert_labelled(load_data_and_labels_crf_file(path))
    assert_labelled(load_data_and_labels_crf_file(str(path)))


def test_crf_open_file(tmp_path):
    path = write(tmp_path / "a.train", LABELLED.encode("utf-8"))
    with open(path, encoding="utf-8") as file:
        assert_labelled(load_data_and_labels_crf_content(file))


def test_crlf_reads_as_lf(tmp_path):
    path = write(tmp_path / "crlf.train", LABELLED.replace("\n", "\r\n").encode("utf-8"))
    assert load_data_and_labels_crf_file(path)[0][0][-1] == "2005"
    assert_labelled(load_data_and_labels_crf_file(path))
    assert_labelled(load_data_and_labels_crf_string(LABELLED.replace("\n", "\r\n")))


def test_separators_tabs_bom_and_no_final_newline():
    text = "\ufeff\n\n" + LABELLED.replace(" \n", "\t \t\n\n\n").replace(" ", "\t").rstrip("\n")
    assert_labelled(load_data_and_labels_crf_string(text))


def test_equal_length_sequences_stay_one_dimensional():
    x, y, f = load_data_and_labels_crf_string("a f X\nb f X\n\nc f Y\nd f Y\n")
    assert x.shape == y.shape == f.shape == (2,)
    assert list(x) == [["a", "b"], ["c", "d"]]
    assert f[1] == [["f"], ["f"]]


def test_two_columns_give_empty_feature_lists():
    x, y, f = load_data_and_labels_crf_string("a I-<x>\nb <x>\n")
    assert (list(x), list(y), list(f)) == ([["a", "b"]], [["B-<x>", "I-<x>"]], [[[], []]])


def test_non_grobid_labels_pass_through():
    y = load_data_and_labels_crf_string("a f B-PER\nb f O\nc f weird\n")[1]
    assert list(y) == [["B-PER", "O", "weird"]]


def test_unlabelled_readers(tmp_path):
    path = write(tmp_path / "a.crf.gz", UNLABELLED.encode("utf-8"), compress=True)
    for result in (load_data_crf_string(UNLABELLED), load_data_crf_content(io.StringIO(UNLABELLED)),
                   load_data_crf_content(UNLABELLED.encode("utf-8").splitlines()), load_data_crf_file(path)):
        assert [as_lists(array) for array in result] == [LABELLED_X, LABELLED_F]


def test_unlabelled_keeps_every_column_after_the_token():
    x, f = load_data_crf_string("June june LINESTART\n\nalone\n")
    assert (list(x), list(f)) == ([["June"], ["alone"]], [[["june", "LINESTART"]], [[]]])


# ----------------------------------------------------------------------------- GROBID matrices: errors

def assert_error(call, source, line_number, fragment):
    with pytest.raises(DataFormatError) as caught:
        call()
    message = str(caught.value)
    where = f"{source}:{line_number}:" if line_number is not None else f"{source}:"
    assert message.startswith(where), message
    assert fragment in message, message
    assert caught.value.line_number == line_number
    return message


@pytest.mark.parametrize("data, line_number, fragment", [
    (b"a f X\nb f X\n\nc f f X\nd f X\n", 5, "3 columns, but the sequence starting at line 4 has 4"),
    (b"a f X\nb f f X\n", 2, "4 columns, but the sequence starting at line 1 has 3"),
    (b"a f X\nb f X\n \nlonely\n", 4, "at least 2"),
    (b"a f X\nb f \xe9t\xe9 X\nc f X\n", 2, "not valid UTF-8"),
    (b"a f X\n" * 3000 + b"\xff\n", 3001, "not valid UTF-8"),
], ids=["ragged second sequence", "ragged first sequence", "missing label", "latin-1", "bad byte far in"])
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
def test_malformed_crf_file(tmp_path, data, line_number, fragment, compress):
    path = write(tmp_path / ("bad.train.gz" if compress else "bad.train"), data, compress)
    assert_error(lambda: load_data_and_labels_crf_file(path), path, line_number, fragment)


@pytest.mark.parametrize("data", [b"", b"\n \n\t\n", b"\r\n\r\n"], ids=["empty", "blank lines", "crlf only"])
def test_empty_crf_file(tmp_path, data):
    path = write(tmp_path / "empty.train", data)
    for load in (load_data_and_labels_crf_file, load_data_crf_file):
        assert_error(lambda: load(path), path, None, "empty")


def test_malformed_crf_content_and_string():
    assert_error(lambda: load_data_and_labels_crf_string("a f X\nb X\n", source="mine.train"),
                 "mine.train", 2, "2 columns")
    assert_error(lambda: load_data_and_labels_crf_content([b"a f X", b"b f \xff"], source="lines"),
                 "lines", 2, "not valid UTF-8")
    assert_error(lambda: load_data_crf_string(""), "<string>", None, "empty")
    assert_error(lambda: load_data_crf_content(["a f", "b f g"]), "<content>", 2, "3 columns")


def test_malformed_open_file_is_named_after_the_file(tmp_path):
    path = write(tmp_path / "bad.train", b"a f X\nb f X\n\nc f X\nd X\n")
    with open(path, "rb") as file:
        assert_error(lambda: load_data_and_labels_crf_content(file), path, 5, "2 columns")


def test_undecodable_text_stream_points_at_or_before_the_bad_line(tmp_path):
    path = write(tmp_path / "bad.train", b"a f X\n" * 5000 + b"\xff f X\n")
    with open(path, encoding="utf-8") as file:
        with pytest.raises(DataFormatError) as caught:
            load_data_and_labels_crf_content(file)
    assert str(caught.value).startswith(f"{path}:")
    assert 1 <= caught.value.line_number <= 5001


def test_not_gzip(tmp_path):
    path = write(tmp_path / "fake.train.gz", LABELLED.encode("utf-8"))
    assert_error(lambda: load_data_and_labels_crf_file(path), path, None, "gzip")


# ----------------------------------------------------------------------------- real GROBID data

@pytest.mark.parametrize("parts", list(GROBID_TRAIN), ids=[parts[-1] for parts in GROBID_TRAIN])
def test_real_grobid_files(parts):
    path = real_file(parts)
    sequences, tokens, feature_columns = GROBID_TRAIN[parts]
    x, y, f = load_data_and_labels_crf_file(path)
    assert len(x) == len(y) == len(f) == sequences
    assert sum(len(sequence) for sequence in x) == tokens
    for tokens_, labels, features in zip(x, y, f):
        assert len(tokens_) == len(labels) == len(features)
        assert all(len(token_features) == feature_columns for token_features in features)
        assert all(label == "O" or label[:2] in ("B-", "I-") for label in labels)
        assert labels[0] == "O" or labels[0].startswith("B-")


def test_real_date_file_round_trip():
    path = real_file(DATE_TRAIN)
    x, y, f = load_data_and_labels_crf_file(path)
    lines = [line.split() for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    rows = [(token, features, label) for tokens, labels, features_ in zip(x, y, f)
            for token, label, features in zip(tokens, labels, features_)]
    assert len(rows) == len(lines) == 2510
    for (token, features, label), columns in zip(rows, lines):
        assert [token, *features] == columns[:-1]
        grobid = columns[-1]
        # "I-<other>" and "<other>" both mean outside, which IOB2 writes "O" and GROBID "<other>".
        assert translate_iob_label_to_grobid(label) == ("<other>" if grobid.endswith("other>") else grobid)
        assert translate_grobid_label_to_iob(translate_iob_label_to_grobid(label)) == label
    assert {label for labels in y for label in labels} == \
        {"O", "B-<day>", "I-<day>", "B-<month>", "B-<year>", "I-<year>"}


def test_real_date_file_gz_and_unlabelled_agree(tmp_path):
    path = real_file(DATE_TRAIN)
    data = path.read_bytes()
    x, y, f = load_data_and_labels_crf_file(path)
    gz_x, gz_y, gz_f = load_data_and_labels_crf_file(write(tmp_path / "date.train.gz", data, compress=True))
    assert (list(gz_x), list(gz_y), list(gz_f)) == (list(x), list(y), list(f))
    crlf = load_data_and_labels_crf_file(write(tmp_path / "crlf.train", data.replace(b"\n", b"\r\n")))
    assert [list(array) for array in crlf] == [list(x), list(y), list(f)]
    # Tagging input: the same file without its label column.
    tag_x, tag_f = load_data_crf_string(data.decode("utf-8"))
    assert list(tag_x) == list(x)
    assert [[features[:-1] for features in sequence] for sequence in tag_f] == list(f)


# ----------------------------------------------------------------------------- CoNLL-2003

CONLL = (
    "-DOCSTART- -X- -X- O\n"
    "\n"
    "EU NNP B-NP I-ORG\n"
    "rejects VBZ B-VP O\n"
    "German JJ B-NP I-MISC\n"
    "call NN I-NP O\n"
    ". . O O\n"
    "\n"
    "Peter NNP B-NP I-PER\n"
    "Blackburn NNP I-NP I-PER\n"
    "-DOCSTART- -X- -X- O\n"
    "Paris NNP B-NP I-LOC\n"
    "Rome NNP B-NP B-LOC\n"
)


def test_conll(tmp_path):
    expected = ([["EU", "rejects", "German", "call", "."], ["Peter", "Blackburn"], ["Paris", "Rome"]],
                [["B-ORG", "O", "B-MISC", "O", "O"], ["B-PER", "I-PER"], ["B-LOC", "B-LOC"]])
    for name, data in (("a.conll", CONLL), ("crlf.conll", CONLL.replace("\n", "\r\n"))):
        x, y = load_data_and_labels_conll(write(tmp_path / name, data.encode("utf-8")))
        assert (as_lists(x), as_lists(y)) == expected


def test_conll_errors(tmp_path):
    path = write(tmp_path / "bad.conll", CONLL.replace("call NN I-NP O", "call NN O").encode("utf-8"))
    assert_error(lambda: load_data_and_labels_conll(path), path, 6, "3 columns")
    path = write(tmp_path / "empty.conll", b"-DOCSTART- -X- -X- O\n\n")
    assert_error(lambda: load_data_and_labels_conll(path), path, None, "empty")


# ----------------------------------------------------------------------------- CoNLL-2012

def conll2012(rows):
    """A *_gold_conll document from (word, named entity tag) rows; an empty row ends a sentence."""
    lines = ["#begin document (nw/wsj/00/wsj_0001); part 000"]
    for index, row in enumerate(rows):
        if not row:
            lines.append("")
            continue
        word, entity = row
        lines.append(f"nw/wsj/00/wsj_0001 0 {index} {word} NNP * - - - - {entity} * -")
    return "\n".join(lines + ["", "#end document", ""])


ONTONOTES = conll2012([("Pierre", "(PERSON*"), ("Vinken", "*)"), (",", "*"), ("61", "(DATE*"),
                       ("years", "*"), ("old", "*)"), (), ("Today", "(DATE)"), ("Paris", "(GPE)")])


def test_ontonotes_file_and_folder(tmp_path):
    expected = ([["Pierre", "Vinken", ",", "61", "years", "old"], ["Today", "Paris"]],
                [["B-PERSON", "I-PERSON", "O", "B-DATE", "I-DATE", "I-DATE"], ["B-DATE", "B-GPE"]])
    path = write(tmp_path / "wsj_0001.gold_conll", ONTONOTES.encode("utf-8"))
    x, y = load_data_and_labels_ontonotes(path)
    assert (as_lists(x), as_lists(y)) == expected
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "wsj_0002.gold_conll", ONTONOTES.encode("utf-8"))
    write(tmp_path / "notes.txt", b"not conll")
    x, y = load_data_and_labels_ontonotes(tmp_path)
    assert (as_lists(x), as_lists(y)) == (expected[0] * 2, expected[1] * 2)


@pytest.mark.parametrize("rows, line_number, fragment", [
    ([("a", "(PERSON*"), ("b", "*")], 2, "not closed"),
    ([("a", "*"), ("b", "*)")], 3, "never opened"),
    ([("a", "(PERSON*"), ("b", "(DATE*")], 3, "still open"),
])
def test_ontonotes_bracket_errors(tmp_path, rows, line_number, fragment):
    path = write(tmp_path / "bad.gold_conll", conll2012(rows).encode("utf-8"))
    assert_error(lambda: load_data_and_labels_ontonotes(path), path, line_number, fragment)


def test_ontonotes_too_few_columns(tmp_path):
    path = write(tmp_path / "short.gold_conll", b"#begin document (x); part 000\nx 0 0 word NN\n")
    assert_error(lambda: load_data_and_labels_ontonotes(path), path, 2, "at least 11")


# ----------------------------------------------------------------------------- TEI

TEI = """<?xml version="1.0" encoding="UTF-8"?>
<TEI xmlns="http://www.tei-c.org/ns/1.0">
    <p>You <rs type="insult">big<lb/>oaf</rs>, I will <rs type="threat">find</rs>
       <rs type="threat">you</rs>!</p>
    <p>  </p>
    <p>No<lb/>entity <hi>here</hi>.</p>
    <p>glued<rs type="insult">moron</rs>s <rs type="insult">bad <hi>nested</hi> words</rs></p>
</TEI>
"""


def test_xml_string_and_file(tmp_path):
    expected = ([["You", "big", "oaf", ",", "I", "will", "find", "you", "!"],
                 ["No", "entity", "here", "."],
                 ["glued", "moron", "s", "bad", "nested", "words"]],
                [["O", "B-<insult>", "I-<insult>", "O", "O", "O", "B-<threat>", "B-<threat>", "O"],
                 ["O", "O", "O", "O"],
                 ["O", "B-<insult>", "O", "B-<insult>", "I-<insult>", "I-<insult>"]])
    x, y = load_data_and_labels_xml_string(TEI)
    assert (as_lists(x), as_lists(y)) == expected
    x, y = load_data_and_labels_xml_file(write(tmp_path / "a.xml", TEI.encode("utf-8")))
    assert (as_lists(x), as_lists(y)) == expected


def test_xml_without_namespace():
    x, y = load_data_and_labels_xml_string('<TEI><text><p>a <rs type="t">b</rs></p></text></TEI>')
    assert (list(x), list(y)) == ([["a", "b"]], [["O", "B-<t>"]])


def test_xml_errors(tmp_path):
    path = write(tmp_path / "bad.xml", b'<TEI>\n<p>fine</p>\n<p>broken</rs>\n</TEI>\n')
    assert_error(lambda: load_data_and_labels_xml_file(path), path, 3, "malformed XML")
    path = write(tmp_path / "latin1.xml", b'<TEI>\n<p>fine</p>\n<p>caf\xe9</p>\n</TEI>\n')
    assert_error(lambda: load_data_and_labels_xml_file(path), path, 3, "malformed XML")
    path = write(tmp_path / "empty.xml", b"<TEI><p> </p></TEI>")
    assert_error(lambda: load_data_and_labels_xml_file(path), path, None, "empty")
    assert_error(lambda: load_data_and_labels_xml_string('<TEI><p><rs>x</rs></p></TEI>'),
                 "<string>", None, "without a type")


def paragraph_text(element):
    """The text of a TEI element with each <lb/> read as a space."""
    text = element.text or ""
    for child in element:
        text += " " if child.tag.endswith("}lb") else paragraph_text(child)
        text += child.tail or ""
    return text


def test_real_toxic_train():
    path = real_file(TOXIC_TRAIN)
    x, y = load_data_and_labels_xml_file(path)
    paragraphs = list(ElementTree.parse(path).getroot().iter("{http://www.tei-c.org/ns/1.0}p"))
    assert len(x) == len(y) == len(paragraphs) == 8
    assert [list(tokens) for tokens in x] == [tokenizeAndFilterSimple(paragraph_text(p))
                                              for p in paragraphs]
    assert all(len(tokens) == len(labels) for tokens, labels in zip(x, y))
    labels = [label for sequence in y for label in sequence]
    assert labels.count("B-<insult>") == 7 and labels.count("B-<threat>") == 5
    assert set(labels) == {"O", "B-<insult>", "I-<insult>", "B-<threat>"}
    assert list(zip(x[0], y[0]))[9:11] == [("moronic", "B-<insult>"), ("wimp", "I-<insult>")]


@pytest.mark.parametrize("compress", [False, True])
def test_iter_data_crf_file_streams_the_same_sequences_in_chunks(tmp_path, compress):
    path = real_file(DATE_TRAIN)
    whole_x, whole_f = reader.load_data_crf_file(path)
    copy = tmp_path / ("date.crf.gz" if compress else "date.crf")
    write(copy, path.read_bytes(), compress)
    chunks = list(reader.iter_data_crf_file(copy, chunk_size=100))
    assert [len(x) for x, _ in chunks] == [100] * 6 + [len(whole_x) - 600]
    assert as_lists(np.concatenate([x for x, _ in chunks])) == as_lists(whole_x)
    assert as_lists(np.concatenate([f for _, f in chunks])) == as_lists(whole_f)


def test_iter_data_crf_file_error_names_file_and_line(tmp_path):
    path = tmp_path / "bad.crf"
    path.write_bytes(b"a x y\nb x y\n\nc x\n\nd x y\ne x\n")
    with pytest.raises(DataFormatError, match=r"bad\.crf:7:"):
        list(reader.iter_data_crf_file(path, chunk_size=1))
