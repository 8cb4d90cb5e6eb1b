"""The Python API shows its work as DeLFT does in an interactive session (epoch lines, the
per-label report, on stderr), says nothing elsewhere unless the host configured logging, never
writes on stdout, and one switch silences it."""
import logging
import textwrap

import pytest

from conftest import delft_stderr_lines, run_python
from delft.utilities import verbosity


@pytest.fixture
def interactive(monkeypatch):
    """An interactive session where the host configured no logging (pytest's own capturing
    handlers on the root logger are not the host's)."""
    monkeypatch.setattr(verbosity, "interactive", lambda: True)
    monkeypatch.setattr(verbosity, "_host_configured_logging", lambda: False)


@pytest.fixture
def clean_logging(monkeypatch):
    """No handler on the root or delft loggers, verbosity unset; restored after."""
    root, delft = logging.getLogger(), logging.getLogger("delft")
    saved = root.handlers[:], delft.handlers[:], delft.level
    root.handlers, delft.handlers = [], []
    monkeypatch.delenv(verbosity.VERBOSITY_ENV, raising=False)
    yield
    verbosity.set_verbosity(None)
    root.handlers, delft.handlers = saved[0], saved[1]
    delft.setLevel(saved[2])


def train_and_eval(trained_date):
    from delft.sequenceLabelling import Sequence

    model = Sequence("date-verbose", max_epoch=2, batch_size=20, recurrent_dropout=0.0, seed=3)
    model.train(trained_date.x_train[:60], trained_date.y_train[:60],
                x_valid=trained_date.x_valid[:20], y_valid=trained_date.y_valid[:20])
    return model.eval(trained_date.x_eval[:20], trained_date.y_eval[:20])


def test_an_interactive_session_sees_epochs_and_the_report_on_stderr(trained_date, capsys,
                                                                      clean_logging, interactive):
    report = train_and_eval(trained_date)
    out, err = capsys.readouterr()
    assert out == ""
    assert "epoch   1/2" in err and "epoch   2/2" in err
    assert "all (micro avg.)" in err and str(report) in err
    assert str(report).startswith(" " * 10) and report["micro"]["f1"] >= 0


def test_quiet_silences_everything(trained_date, capsys, clean_logging, interactive):
    """Even where the host configured logging: delft's records are not emitted."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger().addHandler(handler)
    verbosity.set_verbosity("quiet")
    train_and_eval(trained_date)
    assert capsys.readouterr() == ("", "")
    assert [r for r in records if r.name.startswith("delft")] == []


def test_a_host_that_configured_logging_keeps_its_configuration(trained_date, capsys,
                                                                 clean_logging, monkeypatch):
    """GROBID, a service: their logging decides; delft adds no handler of its own."""
    monkeypatch.setattr(verbosity, "interactive", lambda: True)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    train_and_eval(trained_date)
    assert logging.getLogger("delft").handlers == []
    assert any("epoch   2/2" in r.getMessage() for r in records)
    assert capsys.readouterr().out == ""


def test_a_non_interactive_process_says_nothing_unless_asked(tmp_path):
    """A batch job or GROBID's interpreter: stdout and stderr stay empty (but for TensorFlow's
    own lines); ``DELFT_VERBOSITY=progress`` shows the epochs."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        from delft.sequenceLabelling import Sequence
        x = [["June", "2005"], ["12", "May"]] * 10
        y = [["B-<month>", "B-<year>"], ["B-<day>", "B-<month>"]] * 10
        model = Sequence("tiny", max_epoch=1, batch_size=4, recurrent_dropout=0.0, seed=1)
        model.train(x, y, x_valid=x[:4], y_valid=y[:4])
        model.eval(x[:4], y[:4])
    """))
    silent = run_python([script], cwd=tmp_path)
    assert silent.returncode == 0, silent.stderr[-2000:]
    assert silent.stdout == "" and delft_stderr_lines(silent.stderr) == []
    shown = run_python([script], cwd=tmp_path, DELFT_VERBOSITY="progress")
    assert shown.returncode == 0 and shown.stdout == ""
    assert any(line.startswith("epoch   1/1") for line in delft_stderr_lines(shown.stderr))
