"""GROBID's real client, through JEP from Java: both GROBID lines, one plain and one FEATURES model.

``tests/jep/GrobidLikeClient.java`` reproduces GROBID's ``JEPThreadPool`` + ``DeLFTModel``: the
interpreter set-up (``sub``: kermitt2/grobid 0.8's ``jep.SubInterpreter`` with ``import numpy as np``
and ``import keras.backend as K`` first; ``shared``: grobidOrg/grobid's ``jep.SharedInterpreter``),
the start-up statements, ``Sequence('<model>-<architecture>')``, ``.load(dir_path=...)``,
``load_data_crf_string(input)``, ``.tag(x_all, None[, features=f_all])``, the Java cast to
``List<List<List<String>>>`` and ``delft2grobidLabel``. The models are the ones
``grobidTagger.py date train --output DIR`` writes, and a folder GROBID ships (DeLFT 0.x, from the
shared sample) with GROBID's runtime settings. Skips only where no JDK or no ``jep`` exists.

How the JVM is started (what works here; no LD_PRELOAD needed, libjep.so finds libpython by its
RUNPATH): ``java -cp <site-packages>/jep/jep-<v>.jar:<classes> -Djava.library.path=<site-packages>/jep
GrobidLikeClient ...``, with PYTHONPATH unset (GROBID adds the delft folder and site-packages as
JepConfig include paths, not to the process environment).
"""
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import GROBID_MODELS, GROBID_MODELS_REFERENCE, REPO_ROOT, SAMPLE_DATE, \
    crf_sequences, delft_stderr_lines, subprocess_env, unlabelled_matrix

# two CLI trainings, two JVMs and one Python side by side
pytestmark = pytest.mark.slow

HARNESS = REPO_ROOT / "tests" / "jep" / "GrobidLikeClient.java"
MODES = ("sub", "shared")
MODEL = "date"
ARCHITECTURES = ("BidLSTM_CRF", "BidLSTM_CRF_FEATURES")

# The folder ``grobidTagger.py <model> train --output DIR`` writes under DIR. GROBID loads
# DIR/<model>-<architecture>/ (GROBID's DeLFTModel); the CLI writes DIR/grobid-<model>-<architecture>/ today.
# Switch this one line to "" when the CLI saves under GROBID's name.
CLI_SAVED_PREFIX = ""  # under --output: the folder GROBID loads


def cli_saved_name(model, architecture):
    """(name, architecture) such that Sequence('<name>-<architecture>') is the folder the CLI wrote."""
    return f"{CLI_SAVED_PREFIX}{model}", architecture


def assert_cli_saved(models_dir, model, architecture):
    name, arch = cli_saved_name(model, architecture)
    folder = Path(models_dir) / f"{name}-{arch}"
    written = sorted(p.name for p in Path(models_dir).iterdir())
    assert (folder / "config.json").is_file(), (
        f"grobidTagger.py {model} train --output {models_dir} wrote {written}, expected {folder.name}/")
    return name, arch


# ---- toolchain ------------------------------------------------------------------------------

@dataclass
class Toolchain:
    javac: str
    java: str
    jep_jar: str
    jep_dir: str          # holds libjep.so: java.library.path
    site_packages: str    # the venv's, a JepConfig include path as GROBID sets it


def find_toolchain():
    """The JDK and the installed jep, or the reason the test cannot run."""
    java_home = os.environ.get("JAVA_HOME")
    candidates = [os.path.join(java_home, "bin")] if java_home else []
    javac = next((os.path.join(d, "javac") for d in candidates
                  if os.access(os.path.join(d, "javac"), os.X_OK)), None) or shutil.which("javac")
    if not javac:
        return None, "no JDK: javac not found (set JAVA_HOME or put a JDK >= 11 on PATH)"
    java = os.path.join(os.path.dirname(os.path.realpath(javac)), "java")
    if not os.access(java, os.X_OK):
        java = shutil.which("java")
    if not java:
        return None, f"no java next to {javac} nor on PATH"
    spec = importlib.util.find_spec("jep")
    if spec is None or not spec.submodule_search_locations:
        return None, "jep is not installed in this Python (pip install jep, with JAVA_HOME set)"
    jep_dir = list(spec.submodule_search_locations)[0]
    jars = sorted(glob.glob(os.path.join(jep_dir, "jep-*.jar")))
    if not jars or not os.path.isfile(os.path.join(jep_dir, "libjep.so")):
        return None, f"jep at {jep_dir} has no jep-*.jar or libjep.so"
    return Toolchain(javac, java, jars[-1], jep_dir, os.path.dirname(jep_dir)), None


@pytest.fixture(scope="module")
def toolchain():
    found, reason = find_toolchain()
    if found is None:
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def harness_classes(toolchain, tmp_path_factory):
    classes = tmp_path_factory.mktemp("jep_classes")
    completed = subprocess.run([toolchain.javac, "-d", str(classes), "-cp", toolchain.jep_jar,
                                str(HARNESS)], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return classes


def jvm_env():
    """The JVM's environment: TF's C++ logging quiet; no PYTHONPATH (GROBID sets include paths)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("DELFT_CPU_REPLICAS", None)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def harness_command(toolchain, classes, mode, models_dir, models, input_path, *extra):
    command = [toolchain.java, "-cp", os.pathsep.join([toolchain.jep_jar, str(classes)]),
               f"-Djava.library.path={toolchain.jep_dir}", "GrobidLikeClient",
               "--mode", mode, "--delft", str(REPO_ROOT), "--site-packages", toolchain.site_packages,
               "--models", str(models_dir), "--input", str(input_path)]
    for name, architecture in models:
        command += ["--model", f"{name}:{architecture}"]
    return command + list(extra)


# ---- what the harness prints -----------------------------------------------------------------

HARNESS_PREFIXES = ("# model ", "# timing ")


def parse_harness_stdout(stdout):
    """{full model name: [[(token, grobid label), ...] per sequence]}, timings, and stray lines."""
    labels, timings, stray = {}, {}, []
    current, sequence = None, []
    for line in stdout.split("\n"):
        if line.startswith("# model "):
            current = line[len("# model "):]
            labels[current] = []
        elif line.startswith("# timing "):
            key, seconds, *tokens = line[len("# timing "):].split(" ")
            timings[key] = (float(seconds), int(tokens[0]) if tokens else None)
        elif line == "":
            if sequence:
                labels[current].append(sequence)
            sequence = []
        elif "\t" in line and current is not None:
            token, label = line.split("\t")
            sequence.append((token, label))
        else:
            stray.append(line)
    if sequence:
        labels[current].append(sequence)
    return labels, timings, stray


def delft2grobid_label(label):
    """DeLFTModel.delft2grobidLabel."""
    if label == "O":
        return "<other>"
    if label.startswith("B-"):
        return label.replace("B-", "I-")
    if label.startswith("I-"):
        return label.replace("I-", "")
    return label


def unexpected_stderr(stderr):
    """stderr lines that are neither TF's C++ runtime logging nor numpy's sub-interpreter warning.

    numpy warns once at GROBID 0.8's own ``import numpy as np`` in a sub-interpreter (before delft
    is touched): "UserWarning: NumPy was imported from a Python sub-interpreter ..." on two lines.
    """
    kept, skip_next = [], False
    for line in delft_stderr_lines(stderr):
        if skip_next and line.startswith("Improvements in the case of bugs are welcome"):
            skip_next = False
            continue
        skip_next = False
        if "UserWarning: NumPy was imported from a Python sub-interpreter" in line:
            skip_next = True
            continue
        kept.append(line)
    return kept


# ---- fixtures: models the CLI wrote, the input, the plain-Python reference, the JEP runs ------

@pytest.fixture(scope="module")
def grobid_input(tmp_path_factory):
    """The sample date matrix as GROBID sends it (label column removed)."""
    sequences = crf_sequences(SAMPLE_DATE)
    path = tmp_path_factory.mktemp("jep_input") / "date.crf"
    path.write_text(unlabelled_matrix(sequences), encoding="utf-8")
    return path, sequences


@pytest.fixture(scope="module")
def cli_models(tmp_path_factory, toolchain):
    """grobidTagger.py date train --output DIR, plain and FEATURES, both at once (2 epochs)."""
    models_dir = tmp_path_factory.mktemp("grobid_models")
    processes = [subprocess.Popen(
        [sys.executable, "delft/applications/grobidTagger.py", MODEL, "train",
         "--architecture", architecture, "--input", str(SAMPLE_DATE), "--output", str(models_dir),
         "--max-epoch", "2", "--seed", "1"],
        cwd=str(REPO_ROOT), env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for architecture in ARCHITECTURES]
    for architecture, process in zip(ARCHITECTURES, processes):
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, f"{architecture}: {err[-3000:]}"
    models = [assert_cli_saved(models_dir, MODEL, arch) for arch in ARCHITECTURES]
    return models_dir, models


def finished(started):
    """``{key: CompletedProcess}`` of the processes ``started`` (``{key: Popen}``), once ended."""
    results = {}
    for key, process in started.items():
        out, err = process.communicate(timeout=400)
        results[key] = subprocess.CompletedProcess(process.args, process.returncode,
                                                   out.decode("utf-8", "replace"),
                                                   err.decode("utf-8", "replace"))
    return results


REFERENCE = textwrap.dedent("""
    import json, sys
    from delft.sequenceLabelling import Sequence
    from delft.sequenceLabelling.reader import load_data_crf_string
    input_path, models_dir, out_path, *specs = sys.argv[1:]
    text = open(input_path, encoding="utf-8").read()
    result = {}
    for spec in specs:
        name, architecture = spec.rsplit(":", 1)
        model = Sequence(f"{name}-{architecture}")
        model.load(dir_path=models_dir)
        x_all, f_all = load_data_crf_string(text)
        if "FEATURE" in architecture:
            result[f"{name}-{architecture}"] = model.tag(x_all, None, features=f_all)
        else:
            result[f"{name}-{architecture}"] = model.tag(x_all, None)
    json.dump(result, open(out_path, "w", encoding="utf-8"))
""")


@pytest.fixture(scope="module")
def runs(toolchain, harness_classes, cli_models, grobid_input, tmp_path_factory):
    """Both JEP modes and the plain-Python reference, run side by side on the same models/input."""
    models_dir, models = cli_models
    input_path, _ = grobid_input
    work = tmp_path_factory.mktemp("jep_runs")
    reference_out = work / "reference.json"
    (work / "reference.py").write_text(REFERENCE)
    started = {
        mode: subprocess.Popen(harness_command(toolchain, harness_classes, mode, models_dir, models,
                                               input_path),
                               cwd=str(work), env=jvm_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        for mode in MODES}
    started["python"] = subprocess.Popen(
        [sys.executable, str(work / "reference.py"), str(input_path), str(models_dir),
         str(reference_out)] + [f"{n}:{a}" for n, a in models],
        cwd=str(work), env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = finished(started)
    python = results.pop("python")
    assert python.returncode == 0, python.stderr[-3000:]
    reference = json.loads(reference_out.read_text(encoding="utf-8"))
    return results, reference, models


@pytest.fixture(params=MODES)
def run(request, runs):
    results, reference, models = runs
    return request.param, results[request.param], reference, models


# ---- the tests --------------------------------------------------------------------------------

def test_grobid_startup_load_and_tag_through_jep(run):
    """Exit 0: start-up statements (Embeddings import, keras.backend first in sub), load, tag, cast."""
    mode, completed, _, models = run
    violations = [line for line in completed.stderr.splitlines() if "HARNESS VIOLATION" in line]
    assert completed.returncode == 0, (mode, completed.returncode, violations,
                                       completed.stderr[-4000:])
    assert not violations
    labels, timings, _ = parse_harness_stdout(completed.stdout)
    assert "startup" in timings
    assert sorted(labels) == sorted(f"{n}-{a}" for n, a in models)


def test_labels_through_jep_equal_plain_python(run, grobid_input):
    mode, completed, reference, models = run
    assert completed.returncode == 0, completed.stderr[-4000:]
    _, sequences = grobid_input
    labels, _, _ = parse_harness_stdout(completed.stdout)
    for name, architecture in models:
        full = f"{name}-{architecture}"
        through_jep = labels[full]
        plain = reference[full]
        # plain Python's result has GROBID's shape: one [token, label] of str per input token
        assert len(plain) == len(sequences)
        for pairs, lines in zip(plain, sequences):
            assert len(pairs) == len(lines)
            for pair, line in zip(pairs, lines):
                assert isinstance(pair, list) and len(pair) == 2
                assert all(isinstance(element, str) for element in pair)
                assert pair[0] == line.split()[0]
        # every input token came back through JEP, in order, with the same token
        assert len(through_jep) == len(sequences), (mode, full)
        assert [[t for t, _ in seq] for seq in through_jep] == \
            [[line.split()[0] for line in lines] for lines in sequences], (mode, full)
        expected = [[(token, delft2grobid_label(label)) for token, label in pairs]
                    for pairs in plain]
        assert through_jep == expected, (mode, full)
        distinct = {label for seq in through_jep for _, label in seq}
        assert len(distinct) >= 2 and "<other>" in distinct, (mode, full, distinct)


def test_stderr_clean_through_jep(run):
    """Nothing but TF's own C++ log lines (and numpy's sub-interpreter warning) on stderr."""
    mode, completed, _, _ = run
    lines = unexpected_stderr(completed.stderr)
    tracebacks = sum(line.startswith("Traceback") for line in lines)
    missing = sum("ModuleNotFoundError" in line for line in lines)
    exceptions = [line for line in lines if "Exception" in line]
    assert tracebacks == 0 and missing == 0 and not exceptions and not lines, (
        f"{mode}: {tracebacks} tracebacks, {missing} ModuleNotFoundError, {len(lines)} lines; "
        "first lines:\n" + "\n".join(lines[:12]))


def test_stdout_holds_only_the_harness_lines(run):
    """Python's stdout is GROBID's System.out: delft prints nothing there.

    JEP's ``eval`` runs statements in interactive mode, which echoes the value of an expression
    statement: a ``load`` that returns the Sequence shows up as ``<delft...Sequence object at ...>``.
    """
    mode, completed, _, _ = run
    _, _, stray = parse_harness_stdout(completed.stdout)
    assert stray == [], f"{mode}: {stray[:5]}"


# ---- a folder GROBID ships (DeLFT 0.x, Keras 2), read as it is --------------------------------------

SHIPPED = ("date", "BidLSTM_CRF_FEATURES")
GROBID_RUNTIME = ("--max-sequence-length", "3000", "--batch-size", "20")  # grobid.yaml's overrides


@pytest.fixture(scope="module")
def shipped_runs(toolchain, harness_classes, standin_registry, tmp_path_factory):
    """Both GROBID lines on GROBID's own date FEATURES folder (the shared sample, with the
    glove-840B stand-in its DeLFT 0.4.6 references were made with), GROBID's runtime settings set
    after load; the input is the sample's 150 reference inputs as a feature matrix."""
    folder = "-".join(SHIPPED)
    data = json.loads((GROBID_MODELS_REFERENCE / "inputs" / f"{folder}.json").read_text())
    work = tmp_path_factory.mktemp("jep_shipped")
    matrix = work / "date.crf"
    matrix.write_text("\n\n".join("\n".join(" ".join([token] + features)
                                           for token, features in zip(tokens, rows))
                                 for tokens, rows in zip(data["x"], data["f"])) + "\n",
                      encoding="utf-8")
    started = {mode: subprocess.Popen(
        harness_command(toolchain, harness_classes, mode, GROBID_MODELS, [SHIPPED], matrix,
                        *GROBID_RUNTIME),
        cwd=str(work), env=jvm_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for mode in MODES}
    return finished(started), data


@pytest.mark.parametrize("mode", MODES)
def test_a_shipped_folder_tags_through_jep_as_delft_046(shipped_runs, mode):
    """GROBID loads its own shipped folder through JEP, sets its runtime settings and tags: the
    labels GROBID writes are DeLFT 0.4.6's, mapped by delft2grobidLabel, for every token."""
    results, data = shipped_runs
    completed = results[mode]
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "HARNESS VIOLATION" not in completed.stderr
    labels, _, stray = parse_harness_stdout(completed.stdout)
    assert stray == []
    folder = "-".join(SHIPPED)
    expected = json.loads((GROBID_MODELS_REFERENCE / "delft-0.4.6" / f"{folder}.json").read_text())
    assert labels[folder] == [[(token, delft2grobid_label(label))
                               for token, label in zip(tokens, sequence)]
                              for tokens, sequence in zip(data["x"], expected)]
    assert unexpected_stderr(completed.stderr) == []
