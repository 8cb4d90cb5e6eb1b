"""tag_file's output is written whole or not at all: a temporary file beside the destination,
renamed when complete; stdout (``file_out=None``, as DeLFT's) gets the document once complete.

The branch point emptied the output before reading the input, and wrote the JSON/TEI header
before finding the input empty or malformed.
"""
import json
import xml.etree.ElementTree as ElementTree

import pytest

from conftest import crf_sequences, unlabelled_matrix
from delft.utilities.errors import DataFormatError

OLD = "the previous output\n"


@pytest.fixture
def matrices(tmp_path, trained_date):
    """A good matrix, and one whose last sequence has a ragged line (after many good ones)."""
    text = unlabelled_matrix(crf_sequences(trained_date.corpus_path, limit=40))
    good = tmp_path / "good.crf"
    good.write_text(text, encoding="utf-8")
    bad = tmp_path / "bad.crf"
    bad.write_text(text + "\nJune june X\n2005\n", encoding="utf-8")
    bad_line = text.count("\n") + 3
    return good, bad, bad_line


def outputs_of(folder):
    """What is in ``folder`` besides the inputs and out.txt: temporary files left behind."""
    return sorted(p.name for p in folder.iterdir() if p.suffix != ".crf" and p.name != "out.txt")


@pytest.mark.parametrize("output_format", ["json", "TEI", "iob"])
def test_a_malformed_line_late_in_the_input_leaves_the_output_untouched(
        loaded_date, matrices, tmp_path, monkeypatch, output_format):
    from delft.sequenceLabelling import wrapper

    monkeypatch.setattr(wrapper, "TAG_FILE_CHUNK", 7)  # chunks are tagged and written before it
    _, bad, bad_line = matrices
    out = tmp_path / "out.txt"
    out.write_text(OLD)
    with pytest.raises(DataFormatError, match=f"{bad}:{bad_line}: 1 columns"):
        loaded_date.tag_file(str(bad), output_format, str(out), input_format="crf")
    assert out.read_text() == OLD
    assert outputs_of(tmp_path) == []  # no temporary file left


@pytest.mark.parametrize("output_format", ["json", "TEI", "iob"])
def test_a_complete_run_replaces_the_output(loaded_date, matrices, tmp_path, output_format):
    good, _, _ = matrices
    out = tmp_path / "out.txt"
    out.write_text(OLD)
    loaded_date.tag_file(str(good), output_format, str(out), input_format="crf")
    text = out.read_text(encoding="utf-8")
    if output_format == "json":
        assert len(json.loads(text)["texts"]) == 40
    elif output_format == "TEI":
        assert len(ElementTree.fromstring(text).findall(".//{*}p")) == 40
    else:
        assert len(text.strip("\n").split("\n\n")) == 40


def test_stdout_gets_the_whole_document_once_complete(loaded_date, matrices, capsys):
    good, bad, _ = matrices
    loaded_date.tag_file(str(good), "json", None, input_format="crf")
    assert len(json.loads(capsys.readouterr().out)["texts"]) == 40
    with pytest.raises(DataFormatError):
        loaded_date.tag_file(str(bad), "json", None, input_format="crf")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("content", ["", "\n  \n\t\n"])
def test_an_empty_input_is_an_error_and_writes_nothing(loaded_date, tmp_path, capsys, content):
    path = tmp_path / "empty.txt"
    path.write_text(content)
    out = tmp_path / "out.json"
    for file_out in (str(out), None):
        with pytest.raises(DataFormatError, match=f"{path}: empty: no text to tag"):
            loaded_date.tag_file(str(path), "json", file_out)
    assert not out.exists() and capsys.readouterr().out == ""


def test_a_missing_input_or_a_bad_format_leaves_the_output_untouched(loaded_date, matrices,
                                                                      tmp_path):
    good, _, _ = matrices
    out = tmp_path / "out.txt"
    out.write_text(OLD)
    with pytest.raises(FileNotFoundError):
        loaded_date.tag_file(str(tmp_path / "absent.crf"), "json", str(out), input_format="crf")
    with pytest.raises(ValueError, match=r"output format must be one of json, tei, iob \(any case\), "
                                         r"not 'xml'"):
        loaded_date.tag_file(str(good), "xml", str(out), input_format="crf")
    assert out.read_text() == OLD and outputs_of(tmp_path) == []
