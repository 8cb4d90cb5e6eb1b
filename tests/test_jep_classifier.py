"""GROBID's classifier client, through JEP from Java: ``tests/jep/GrobidLikeClassifier.java``
runs GROBID's statements (JEPThreadPoolClassifier's start-up, DeLFTClassifierModel's
``Classifier('<name>_<arch>', 'architecture=<arch>')``, ``load``, ``predict(input, 'json',
use_main_thread_only=True)`` and ``json.dumps``) on GROBID's shipped ``copyright_gru`` (with the
glove-840B stand-in its DeLFT 0.4.6 reference was made with) and on a classifier the CLI trained.
Skips only where no JDK or no ``jep`` exists (the toolchain of tests/test_jep_grobid.py).
"""
import json
import subprocess
import sys

import pytest

from conftest import GROBID_MODELS, GROBID_MODELS_REFERENCE, REPO_ROOT, subprocess_env
from classifier_data import data
from test_jep_grobid import find_toolchain, jvm_env, unexpected_stderr

pytestmark = pytest.mark.slow

HARNESS = REPO_ROOT / "tests" / "jep" / "GrobidLikeClassifier.java"


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    toolchain, reason = find_toolchain()
    if toolchain is None:
        pytest.skip(reason)
    classes = tmp_path_factory.mktemp("jep_classifier_classes")
    completed = subprocess.run([toolchain.javac, "-d", str(classes), "-cp", toolchain.jep_jar,
                                str(HARNESS)], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr

    def run(models_dir, model, texts_file, *extra):
        command = [toolchain.java, "-cp", f"{toolchain.jep_jar}:{classes}",
                   f"-Djava.library.path={toolchain.jep_dir}", "GrobidLikeClassifier",
                   "--delft", str(REPO_ROOT), "--site-packages", toolchain.site_packages,
                   "--models", str(models_dir), "--model", model, "--input", str(texts_file),
                   *extra]
        return subprocess.run(command, capture_output=True, text=True, timeout=400,
                              env=jvm_env(), cwd=str(texts_file.parent))
    return run


def test_grobids_shipped_classifier_through_jep_gives_delft_046s_scores(harness, tmp_path,
                                                                        standin_registry):
    reference = json.loads((GROBID_MODELS_REFERENCE / "delft-0.4.6" /
                            "copyright_gru.json").read_text(encoding="utf-8"))
    texts = [text for text in reference["texts"] if "\n" not in text]
    texts_file = tmp_path / "texts.txt"
    texts_file.write_text("\n".join(texts) + "\n", encoding="utf-8")
    completed = harness(GROBID_MODELS, "copyright:gru", texts_file, "--batch-size", "20")
    assert completed.returncode == 0, completed.stderr[-4000:]
    result = json.loads(completed.stdout)
    expected = {entry["text"]: entry for entry in reference["result"]["classifications"]}
    assert [entry["text"] for entry in result["classifications"]] == texts
    for entry in result["classifications"]:
        for name in ("publisher", "authors", "undecided"):
            assert entry[name] == pytest.approx(expected[entry["text"]][name], abs=1e-4)
    assert result["model"] == "copyright_gru" and result["software"] == "DeLFT"
    assert unexpected_stderr(completed.stderr) == []


def test_a_classifier_the_cli_trained_runs_through_jep(harness, tmp_path):
    texts, labels = data()
    csv = tmp_path / "data.csv"
    csv.write_text("".join(f'"{t}",{label},CC-BY\n' for t, label in zip(texts, labels)))
    trained = subprocess.run(
        [sys.executable, str(REPO_ROOT / "delft" / "applications" / "licenseClassifier.py"),
         "train", "--task", "copyright", "--input", str(csv), "--output",
         str(tmp_path / "models"), "--max-epoch", "3", "--maxlen", "24", "--seed", "1"],
        capture_output=True, text=True, timeout=300, env=subprocess_env(), cwd=str(tmp_path))
    assert trained.returncode == 0, trained.stderr[-3000:]
    texts_file = tmp_path / "texts.txt"
    texts_file.write_text("\n".join(texts[:30]) + "\n", encoding="utf-8")
    completed = harness(tmp_path / "models", "copyright:gru", texts_file)
    assert completed.returncode == 0, completed.stderr[-4000:]
    result = json.loads(completed.stdout)
    from delft.textClassification import Classifier

    model = Classifier("copyright_gru")
    model.load(str(tmp_path / "models"))
    direct = model.predict(texts[:30], "json")
    for got, want in zip(result["classifications"], direct["classifications"]):
        assert got["text"] == want["text"]
        for name in ("publisher", "authors", "undecided"):
            assert got[name] == pytest.approx(want[name], abs=1e-6)
    assert unexpected_stderr(completed.stderr) == []
