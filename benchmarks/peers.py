"""Running our CLIs and DeLFT 1.2.0's side by side, each as a fresh process, for the benchmarks.

DeLFT 1.2.0 (PyTorch) lives in its own virtual environment, never in ours: point
``DELFT12_PYTHON`` at its interpreter (``pip install delft==1.2.0`` in a scratch venv). Without it
the benchmarks report our figures alone.
"""
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DELFT12_PYTHON = os.environ.get("DELFT12_PYTHON", "")
MICRO_F1 = re.compile(r"all \(micro avg\.\)\s+[\d.]+\s+[\d.]+\s+([\d.]+)")


@dataclass
class Run:
    """One command's outcome: exit code, its output streams, wall time and peak RSS (GB)."""

    code: int
    out: str
    err: str
    wall: float
    peak_rss_gb: float

    def micro_f1(self):
        """The last micro-averaged F1 of an evaluation report in the output, in percent."""
        found = MICRO_F1.findall(self.out + self.err)
        if not found:
            raise SystemExit(f"no evaluation report in the output:\n{self.err[-3000:]}")
        return float(found[-1]) * 100


def delft12_available():
    return bool(DELFT12_PYTHON) and os.path.isfile(DELFT12_PYTHON)


# a wrapper process whose only child is the command: its RUSAGE_CHILDREN is that command's peak
_MEASURED = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
             "sys.stderr.write('\\nPEAK_RSS_KB=%d\\n' % "
             "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(code)")


def run(command, cwd, env=None, timeout=7200):
    """Run ``command`` to its end; returns its streams, wall time and its own peak RSS."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", _MEASURED, *command], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = process.communicate(timeout=timeout)
    wall = time.perf_counter() - start
    err, _, peak = err.rpartition("\nPEAK_RSS_KB=")
    return Run(process.returncode, out, err, wall, int(peak.strip() or 0) / 1024 ** 2)


def ours(application, args, cwd, replicas=None):
    """``python delft/applications/<application>.py args...`` of this repository."""
    env = dict(os.environ, PYTHONPATH=REPO)
    if replicas:
        env["DELFT_CPU_REPLICAS"] = str(replicas)
    script = os.path.join(REPO, "delft", "applications", f"{application}.py")
    return run([sys.executable, script, *args], cwd, env)


def _delft12_environment():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DELFT_CPU_REPLICAS")}


def delft12(application, args, cwd):
    """``python -m delft.applications.<application> args...`` of DeLFT 1.2.0 (its own venv)."""
    return run([DELFT12_PYTHON, "-m", f"delft.applications.{application}", *args], cwd,
               _delft12_environment())


def application(toolkit, name, args, cwd):
    """The application ``name`` of ``toolkit`` ("ours" or DeLFT 1.2.0's) with ``args``."""
    return ours(name, args, cwd) if toolkit == "ours" else delft12(name, args, cwd)


def grobid_train(toolkit, model, architecture, data, models, cwd, options=()):
    """``grobidTagger <model> train`` of ``toolkit`` into the folder ``models`` (``options``
    added, e.g. ``--max-epoch N``); stops the benchmark with the command's error if it fails."""
    args = [model, "train", "--architecture", architecture, "--input", data, "--output", models,
            *options]
    result = application(toolkit, "grobidTagger", args, cwd)
    if result.code != 0:
        raise SystemExit(f"{toolkit} training of {model} failed:\n{result.err[-3000:]}")
    return result


def script(toolkit, code, args, cwd):
    """``python -c code args...`` in ``toolkit``'s interpreter, this repository or DeLFT 1.2.0
    importable as ``delft``."""
    if toolkit == "ours":
        return run([sys.executable, "-c", code, *args], cwd, dict(os.environ, PYTHONPATH=REPO))
    return run([DELFT12_PYTHON, "-c", code, *args], cwd, _delft12_environment())
