"""End-to-end tests of the nerTagger and insultTagger scripts, run as users run them (subprocesses).

Each training (tiny data, a few epochs) and the taggings of its model form a chain; the chains run
at once, to keep the file fast.
"""
import json
import os
import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from delft.applications import insultTagger, nerTagger
from delft.utilities.data_path import shared_data_file

REPO_ROOT = Path(__file__).resolve().parents[1]
NER = str(REPO_ROOT / "delft" / "applications" / "nerTagger.py")
INSULT = str(REPO_ROOT / "delft" / "applications" / "insultTagger.py")
TOXIC = shared_data_file("sequenceLabelling", "toxic")
NER_MODEL = "ner-en-conll2003-BidLSTM_CRF"
FAST = ["--max-epoch", "4", "--batch-size", "8", "--learning-rate", "0.01", "--seed", "1"]
SHUTDOWN_NOISE = ("Traceback", "Bad file descriptor", "Exception ignored")
TIMEOUT = 240

PER = [["John", "Smith"], ["Mary"], ["Angela", "Merkel"], ["Peter", "Blackburn"], ["Werner", "Zwingmann"]]
LOC = [["Paris"], ["New", "York"], ["Germany"], ["Brussels"], ["London"]]
ORG = [["European", "Commission"], ["Reuters"], ["Google"], ["United", "Nations"], ["BMW"]]
TEMPLATES = ["{PER} lives in {LOC} .", "{PER} works for {ORG} in {LOC} .",
             "{ORG} opened an office in {LOC} .", "The {ORG} spokesman {PER} said on Monday .",
             "{PER} met {PER} in {LOC} .", "Talks between {LOC} {LOC} ended ."]
TEXTS = ["John Smith lives in Paris .", "The Reuters spokesman Mary said on Monday .",
         "Angela Merkel works for Google in London ."]


def sentences(count, seed):
    """``count`` sentences of (token, entity type or None, index of the token in its entity)."""
    rng = random.Random(seed)
    names = {"PER": PER, "LOC": LOC, "ORG": ORG}
    result = []
    for _ in range(count):
        rows = []
        for word in rng.choice(TEMPLATES).split():
            if word.startswith("{"):
                kind = word[1:-1]
                rows += [(token, kind, i) for i, token in enumerate(rng.choice(names[kind]))]
            else:
                rows.append((word, None, 0))
        result.append(rows)
    return result


def conll(rows_list, scheme):
    """CoNLL-2003 text (4 columns, -DOCSTART-): IOB1 (``B-`` only after an entity of the same type)
    or IOB2."""
    lines = ["-DOCSTART- -X- -X- O", ""]
    for rows in rows_list:
        previous = None
        for token, kind, index in rows:
            if kind is None:
                label = "O"
            elif scheme == "iob2" or (index == 0 and previous == kind):
                label = ("B-" if index == 0 else "I-") + kind
            else:
                label = "I-" + kind
            lines.append(f"{token} NNP I-NP {label}")
            previous = kind
        lines.append("")
    return "\n".join(lines) + "\n"


def environment(replicas=None):
    env = {k: v for k, v in os.environ.items() if k != "DELFT_CPU_REPLICAS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    # the processes run side by side: one compute thread each, not every core each (oversubscribed)
    env.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    env.setdefault("TF_NUM_INTEROP_THREADS", "2")
    if replicas:
        env["DELFT_CPU_REPLICAS"] = str(replicas)
    return env


def start(script, *args, replicas=None):
    return subprocess.Popen([sys.executable, script, *map(str, args)], cwd=REPO_ROOT,
                            env=environment(replicas), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(process):
    stdout, stderr = process.communicate(timeout=TIMEOUT)
    return process.returncode, stdout, stderr


def run(script, *args, replicas=None):
    return finish(start(script, *args, replicas=replicas))


def check_ok(result):
    rc, stdout, stderr = result
    assert rc == 0, stderr[-3000:]
    for noise in SHUTDOWN_NOISE:
        assert noise not in stderr, stderr[-3000:]
    return stdout, stderr


def one_line_error(result):
    rc, _, stderr = result
    assert rc != 0
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("applications")
    (root / "eng.train").write_text(conll(sentences(60, 1), "iob1"))
    (root / "eng.testa").write_text(conll(sentences(15, 2), "iob2"))
    (root / "eng.testb").write_text(conll(sentences(15, 3), "iob1"))
    (root / "texts.txt").write_text("\n".join(TEXTS) + "\n")
    return root


def chain(*steps):
    """Run the steps (argument tuples of ``start``) one after the other while each succeeds."""
    results = []
    for script, args, replicas in steps:
        results.append(run(script, *args, replicas=replicas))
        if results[-1][0] != 0:
            break
    return results


@pytest.fixture(scope="module")
def runs(data):
    """Every training and the taggings of its model, the chains run at once (each command a process).

    Results by name: (exit code, stdout, stderr), absent when an earlier step of the chain failed.
    """
    d = data
    ner_tag = ["tag", "--file-in", d / "texts.txt", "--output", d / "models"]
    chains = {
        ("ner_train", "ner_json", "ner_iob"): [
            (NER, ["train_eval", "--train", d / "eng.train", "--valid", d / "eng.testa",
                   "--test", d / "eng.testb", "--output", d / "models", *FAST], None),
            (NER, ner_tag, None),
            (NER, [*ner_tag, "--output-format", "iob", "--file-out", d / "tagged.iob"], None)],
        ("multi_train", "multi_tag"): [
            (NER, ["train", "--multi-gpu", "--train", d / "eng.train", "--valid", d / "eng.testa",
                   "--output", d / "multi", *FAST], 2),
            (NER, ["tag", "--multi-gpu", "--file-in", d / "texts.txt", "--output", d / "multi"], 2)],
    }
    if (TOXIC / "train.xml").exists() and (TOXIC / "valid.xml").exists():
        chains[("insult_train", "insult_tag")] = [
            (INSULT, ["train", "--input", TOXIC / "train.xml", "--valid", TOXIC / "valid.xml",
                      "--output", d / "insult", "--max-epoch", "2", "--batch-size", "8",
                      "--seed", "1"], None),
            (INSULT, ["tag", "--output", d / "insult"], None)]
    results = {}
    with ThreadPoolExecutor(max_workers=len(chains)) as pool:
        futures = {names: pool.submit(chain, *steps) for names, steps in chains.items()}
        for names, future in futures.items():
            results.update(zip(names, future.result()))
    return results


def result_of(runs, name):
    if name not in runs:
        pytest.fail(f"{name} did not run: an earlier step failed")
    return runs[name]


def micro_f1(report):
    match = re.search(r"all \(micro avg\.\)\s+\S+\s+\S+\s+(\S+)", report)
    assert match, report
    return float(match.group(1))


def test_ner_train_eval(data, runs):
    stdout, stderr = check_ok(result_of(runs, "ner_train"))
    assert "60 train sequences, 15 validation sequences, 15 evaluation sequences" in stderr
    assert micro_f1(stdout) > 0.3, stdout
    model = data / "models" / NER_MODEL
    assert json.loads((model / "config.json").read_text())["architecture"] == "BidLSTM_CRF"


def test_ner_tag_json(runs):
    stdout, _ = check_ok(result_of(runs, "ner_json"))
    result = json.loads(stdout)  # stdout holds the JSON alone
    assert result["model"] == NER_MODEL
    assert [item["text"] for item in result["texts"]] == TEXTS
    entities = [e for item in result["texts"] for e in item["entities"]]
    assert entities and {e["class"] for e in entities} <= {"PER", "LOC", "ORG"}
    for item in result["texts"]:
        for entity in item["entities"]:
            assert item["text"][entity["beginOffset"]:entity["endOffset"] + 1] == entity["text"]


def test_ner_tag_iob(data, runs):
    check_ok(result_of(runs, "ner_iob"))
    blocks = (data / "tagged.iob").read_text().strip("\n").split("\n\n")
    assert len(blocks) == len(TEXTS)
    for block, text in zip(blocks, TEXTS):
        rows = [line.split("\t") for line in block.split("\n")]
        assert [token for token, _ in rows] == text.split()
        assert {label for _, label in rows} <= {"O"} | {f"{p}-{t}" for p in "BI" for t in
                                                       ("PER", "LOC", "ORG")}


def test_ner_multi_gpu_train_and_tag(runs):
    stdout, stderr = check_ok(result_of(runs, "multi_train"))
    assert "MirroredStrategy over 2 devices" in stderr
    assert "60 train sequences, 15 validation sequences" in stderr
    stdout, stderr = check_ok(result_of(runs, "multi_tag"))
    assert "MirroredStrategy over 2 devices" in stderr
    result = json.loads(stdout)
    assert [item["text"] for item in result["texts"]] == TEXTS


def test_insult_train_and_tag(runs):
    if not ((TOXIC / "train.xml").exists() and (TOXIC / "valid.xml").exists()):
        pytest.skip(f"shared toxic data {TOXIC}/train.xml, valid.xml absent")
    _, stderr = check_ok(result_of(runs, "insult_train"))
    assert "8 train sequences, 79 validation sequences" in stderr
    stdout, _ = check_ok(result_of(runs, "insult_tag"))
    result = json.loads(stdout)
    assert result["model"] == "insult-BidLSTM_CRF"
    assert [item["text"] for item in result["texts"]] == insultTagger.EXAMPLES


@pytest.fixture(scope="module")
def bad_files(data):
    (data / "bad.conll").write_text("John NNP I-PER\nSmith NNP\n")
    (data / "bad.xml").write_text('<TEI><p>You <rs type="insult">oaf</p></TEI>')
    (data / "bad.txt").write_bytes(b"fine\nnot \xff utf-8\n")
    return data


@pytest.mark.parametrize("script, args, expected", [
    (NER, ["train"], "needs --train FILE"),
    (NER, ["train_eval", "--train", "{d}/missing.conll"], "--train {d}/missing.conll: no such file"),
    (NER, ["train", "--train", "{d}/eng.train", "--valid", "{d}/missing"], "--valid"),
    (NER, ["train", "--train", "{d}/bad.conll"], "{d}/bad.conll:2: 2 columns"),
    (NER, ["eval"], "needs --test FILE"),
    (NER, ["eval", "--test", "{d}/eng.testb", "--output", "{d}/none"],
     f"{{d}}/none/{NER_MODEL}: no such model directory"),
    (NER, ["tag"], "needs --file-in FILE"),
    (NER, ["tag", "--file-in", "{d}/missing.txt"], "no such file"),
    (NER, ["tag", "--file-in", "{d}/bad.txt"], "{d}/bad.txt:2: not valid UTF-8"),
    (NER, ["train", "--train", "{d}/eng.train", "--architecture", "Nope"], "unknown architecture"),
    (INSULT, ["train", "--input", "{d}/missing.xml"], "--input {d}/missing.xml: no such file"),
    (INSULT, ["train", "--input", "{d}/bad.xml"], "{d}/bad.xml:1: malformed XML"),
    (INSULT, ["tag", "--file-in", "{d}/bad.txt"], "not valid UTF-8"),
    (INSULT, ["tag", "--output", "{d}/none"], "{d}/none/insult-BidLSTM_CRF: no such model directory"),
])
def test_bad_input_is_one_line(bad_files, script, args, expected):
    line = one_line_error(run(script, *[a.format(d=bad_files) for a in args]))
    assert expected.format(d=bad_files) in line


def test_main_returns_exit_code(capsys):
    assert nerTagger.main(["train"]) == 2
    assert insultTagger.main(["eval"]) == 2
    assert capsys.readouterr().err.count("\n") == 2


def test_conll2012_reading(tmp_path):
    gold = tmp_path / "a_gold_conll"
    gold.write_text("#begin document (a); part 000\n"
                    "a 0 0 John NNP * - - - - (PERSON* -\n"
                    "a 0 1 Smith NNP * - - - - *) -\n"
                    "a 0 2 left VBD * - - - - * -\n"
                    "#end document\n")
    x, y, _ = nerTagger.read_ner(str(tmp_path), "conll2012", "--train")
    assert list(x[0]) == ["John", "Smith", "left"] and list(y[0]) == ["B-PERSON", "I-PERSON", "O"]
    columns = tmp_path / "eng.train"
    columns.write_text("John B-PERSON\nleft O\n")
    x, y, _ = nerTagger.read_ner(str(columns), "conll2012", "--train")
    assert list(y[0]) == ["B-PERSON", "O"]
