"""GROBID and DeLFT users' names and options: model folders, per-model defaults, the newest
training file, DeLFT's option forms (refused when without effect), the API signatures, DeLFT's JSON
schema and get_entities_with_offsets, and the helpers downstream code imports."""
import gzip
import inspect
import itertools
import json
import random

import pytest

from conftest import SAMPLE_DATE, delft_stderr_lines, run_python
from delft.applications import flow, grobidTagger
from delft.sequenceLabelling.presets import preset
from delft.sequenceLabelling.tagger import get_entities_with_offsets
from delft.utilities.errors import ConfigurationError

SCRIPT = grobidTagger.__file__


# -- model names and folders ---------------------------------------------------------------------
@pytest.mark.parametrize("output, suffix, expected", [
    (None, None, "grobid-date-BidLSTM_CRF"), ("models", None, "date-BidLSTM_CRF"),
    ("models", "v2.1", "date-BidLSTM_CRF-v2.1"), (None, "x", "grobid-date-BidLSTM_CRF-x")])
def test_model_name_follows_delft(output, suffix, expected):
    assert grobidTagger.model_name("date", "BidLSTM_CRF", suffix, prefixed=output is None) == \
        expected


@pytest.mark.parametrize("suffix", ["-bad", "a b", "a/b", "é"])
def test_bad_suffix_is_one_line(suffix):
    with pytest.raises(ConfigurationError, match="--suffix"):
        grobidTagger.model_name("date", "BidLSTM_CRF", suffix, prefixed=False)


def test_default_input_is_the_newest_plain_file_before_its_gz(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "data" / "sequenceLabelling" / "grobid" / "date"
    folder.mkdir(parents=True)
    for name in ("date-060518.train", "date-220311.train.gz", "date-991231.train",
                 "date-250101.txt", "date-notadate.train", "date-221399.train"):
        (folder / name).write_text("x")
    # 99 is 1999 for %y: 220311 (2022) is the newest valid date
    assert grobidTagger.default_input("date").endswith("date-220311.train.gz")
    (folder / "date-220311.train").write_text("x")
    assert grobidTagger.default_input("date").endswith("date-220311.train")
    with pytest.raises(ConfigurationError, match="no --input FILE given"):
        grobidTagger.default_input("header")


@pytest.mark.parametrize("model", grobidTagger.MODELS + ["software-mention", "unknown-model"])
def test_every_grobid_model_has_delft_12_defaults(model):
    expected_rnn = {"citation": (30, 500, 60), "header": (9, 3500, 80), "date": (60, 50, 60),
                    "affiliation-address": (20, 600, 60), "reference-segmenter": (5, 3000, 60),
                    "funding-acknowledgement": (30, 800, 60), "patent-citation": (40, 1000, 60),
                    "figure": (3, 1000, 60), "table": (3, 3000, 60)}
    expected_bert = {"citation": (20, 200, 60), "header": (6, 512, 60), "date": (80, 30, 60),
                     "affiliation-address": (20, 200, 60), "patent-citation": (8, 512, 60),
                     "funding-acknowledgement": (8, 512, 60)}
    rnn = expected_rnn.get(model, (20, 1500, 60) if model.startswith("software") else
                           (20, 3000, 60))
    bert = expected_bert.get(model, (8, 512, 30) if model.startswith("software") else
                             (20, 200, 60))
    for defaults, (batch, length, epochs) in ((preset("grobid", model, "rnn"), rnn),
                                              (preset("grobid", model, "transformer"), bert)):
        assert (defaults["batch_size"], defaults["max_sequence_length"], defaults["max_epoch"],
                defaults["patience"]) == (batch, length, epochs, 5)


# -- option forms --------------------------------------------------------------------------------
def parse(*argv):
    return flow.resolve(grobidTagger.APPLICATION, ["date", "train", *argv]).args


@pytest.mark.parametrize("argv, expected", [
    ([], None), (["--early-stop"], True), (["--early-stop", "true"], True),
    (["--early-stop", "F"], False), (["--early-stop", "False"], False),
    (["--no-early-stop"], False)])
def test_early_stop_forms(argv, expected):
    assert parse(*argv).early_stop is expected


def test_features_indices_ranges_and_suffix():
    args = parse("--features-indices", "9-12,15", "--suffix", "v2")
    assert args.features_indices == [9, 10, 11, 12, 15] and args.suffix == "v2"
    kwargs = flow.resolve(grobidTagger.APPLICATION, ["date", "train", "--features-indices",
                                                     "9-12,15", "--suffix", "v2"]).settings
    assert kwargs["features_indices"] == [9, 10, 11, 12, 15]


@pytest.mark.parametrize("option", ["--num-workers 2", "--use-ELMo",
                                    "--text-features-indices 1", "--continuous-features-indices 2"])
def test_options_without_effect_are_refused_in_one_line(option):
    with pytest.raises(ConfigurationError, match=option.split()[0]):
        parse(*option.split())


def test_refused_option_on_the_command_line_is_one_line(tmp_path):
    done = run_python([SCRIPT, "date", "train", "--input", SAMPLE_DATE, "--num-workers", "2"],
                      cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    lines = delft_stderr_lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: --num-workers: ")


def test_wandb_without_its_key_is_one_line_before_training(tmp_path):
    pytest.importorskip("wandb", reason="the optional wandb package is not installed")
    done = run_python([SCRIPT, "date", "train", "--input", SAMPLE_DATE, "--wandb"], cwd=tmp_path,
                      timeout=120, WANDB_API_KEY="", WANDB_MODE="online")
    assert done.returncode == 2
    assert delft_stderr_lines(done.stderr) == [
        "error: --wandb needs WANDB_API_KEY (or WANDB_MODE=offline to keep the run on this "
        "machine)"]
    assert not (tmp_path / "data").exists()  # nothing trained, nothing saved


def test_gz_training_file_trains_and_saves_where_grobid_loads(tmp_path):
    data = tmp_path / "date-sample.train.gz"
    with gzip.open(data, "wt", encoding="utf-8") as out:
        out.write(SAMPLE_DATE.read_text(encoding="utf-8"))
    done = run_python([SCRIPT, "date", "train", "--input", data, "--output", tmp_path / "models",
                       "--max-epoch", "1", "--architecture", "BidLSTM_CRF_FEATURES"],
                      cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "models" / "date-BidLSTM_CRF_FEATURES" / "model.weights.h5").is_file()
    assert done.stdout == ""  # train prints no result; its logs are on stderr


# -- the API --------------------------------------------------------------------------------------
def test_signatures_take_delfts_arguments():
    from delft.sequenceLabelling import Sequence

    tag = list(inspect.signature(Sequence.tag).parameters)
    assert tag[:8] == ["self", "texts", "output_format", "features", "batch_size", "multi_gpu",
                       "window_stride", "nb_workers"]
    nfold = list(inspect.signature(Sequence.train_nfold).parameters)
    assert nfold[:7] == ["self", "x_train", "y_train", "x_valid", "y_valid", "f_train",
                         "f_valid"]
    train = list(inspect.signature(Sequence.train).parameters)
    assert train[:7] == ["self", "x_train", "y_train", "f_train", "x_valid", "y_valid", "f_valid"]


def test_tag_takes_window_stride_and_nb_workers(loaded_date, trained_date):
    sequences = [list(s) for s in trained_date.x_eval[:5]]
    assert loaded_date.tag(sequences, None, window_stride=3, nb_workers=4) == \
        loaded_date.tag(sequences, None)


def test_json_is_delfts_schema(loaded_date):
    text = "Received 12 June 2005, accepted 3 July 2006."
    result = loaded_date.tag([text], "json")
    assert list(result) == ["software", "date", "model", "texts", "runtime"]
    assert result["software"] == "DeLFT"
    (item,) = result["texts"]
    assert list(item) == ["text", "entities"]
    for entity in item["entities"]:
        assert list(entity) == ["text", "class", "score", "beginOffset", "endOffset"]
        # DeLFT's endOffset: the offset of the entity's last character, included
        assert entity["text"] == text[entity["beginOffset"]:entity["endOffset"] + 1]
        assert not entity["text"][-1].isspace()


# -- get_entities_with_offsets -------------------------------------------------------------------
def delft_reference(seq, offsets):
    """DeLFT 1.2.0's get_entities_with_offsets as its notes describe it (types after the prefix)."""
    i, chunks = 0, []
    seq = seq + ["O"]
    types = [tag[2:] if tag[1:2] == "-" else tag for tag in seq]
    max_length = min(len(seq) - 1, len(offsets))
    while i < max_length:
        if seq[i].startswith("B"):
            j = max_length
            if i + 1 != max_length:
                for j in range(i + 1, max_length + 1):
                    if seq[j].startswith("I") and types[j] == types[i]:
                        continue
                    break
            chunks.append((types[i], i, j, offsets[i][0], offsets[j - 1][1] - 1))
            i = j
        else:
            i += 1
    return chunks


def test_get_entities_with_offsets_equals_delfts_on_every_short_sequence():
    labels = ["O", "B-a", "I-a", "B-b", "I-b", "I-<x-y>", "B-<x-y>"]
    for n in range(0, 6):
        offsets = [(2 * k, 2 * k + 1) for k in range(n)]
        for seq in itertools.product(labels, repeat=n):
            assert get_entities_with_offsets(list(seq), offsets) == \
                delft_reference(list(seq), offsets), seq


def test_get_entities_with_offsets_random_and_truncated():
    rng = random.Random(0)
    labels = ["O", "B-a", "I-a", "B-b", "I-b"]
    for _ in range(2000):
        seq = [rng.choice(labels) for _ in range(rng.randint(0, 30))]
        offsets = [(3 * k, 3 * k + 2) for k in range(rng.randint(0, len(seq) + 2))]
        assert get_entities_with_offsets(seq, offsets) == delft_reference(seq, offsets)


def test_downstream_import_paths_exist():
    from delft.sequenceLabelling.evaluation import (accuracy_score, f1_score,  # noqa: F401
                                                    precision_score, recall_score)
    from delft.sequenceLabelling.reader import (load_data_and_labels_conll,  # noqa: F401
                                                load_data_and_labels_crf_file,
                                                load_data_and_labels_crf_string,
                                                load_data_and_labels_xml_file,
                                                load_data_crf_string)
    from delft.utilities.Embeddings import Embeddings, load_resource_registry  # noqa: F401
    from delft.utilities.Tokenizer import (tokenize, tokenizeAndFilter,  # noqa: F401
                                           tokenizeAndFilterSimple)
    from delft.utilities.Utilities import parse_number_ranges, t_or_f  # noqa: F401

    assert json.dumps(parse_number_ranges("9-11")) == "[9, 10, 11]"
    assert t_or_f("") is True
