"""House rules checked: importing delft changes nothing global, no import cycles, no module over
~500 lines, and the defaults of Sequence, the config fields and the CLIs agree."""
import ast
import json
import textwrap

import pytest

from conftest import REPO_ROOT, run_python

PACKAGE = REPO_ROOT / "delft"


def test_importing_delft_changes_nothing_global(tmp_path):
    """Environment, warning filters, logging handlers and matplotlib's backend are as the
    libraries delft builds on left them (numpy, TensorFlow and Keras set their own at import)."""
    script = tmp_path / "imports.py"
    out = tmp_path / "out.json"
    script.write_text(textwrap.dedent(f"""
        import json, logging, os, sys, warnings
        import numpy, tensorflow, keras, matplotlib
        env, filters = dict(os.environ), list(warnings.filters)
        handlers = list(logging.getLogger().handlers)
        backend = matplotlib.get_backend()
        import delft
        from delft.utilities.Embeddings import Embeddings
        import delft.sequenceLabelling
        from delft.sequenceLabelling import Sequence
        from delft.sequenceLabelling.reader import load_data_crf_string
        from delft.sequenceLabelling.models import transformer
        from delft.sequenceLabelling.transformers import encoder, preprocess
        from delft.applications import common, grobidTagger, nerTagger, insultTagger
        json.dump({{"env": dict(os.environ) == env, "filters": list(warnings.filters) == filters,
                    "handlers": list(logging.getLogger().handlers) == handlers,
                    "backend": matplotlib.get_backend() == backend,
                    "keras_hub": "keras_hub" in sys.modules}}, open({str(out)!r}, "w"))
    """))
    done = run_python([script], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""  # and nothing written to stdout
    assert json.loads(out.read_text()) == {"env": True, "filters": True, "handlers": True,
                                           "backend": True, "keras_hub": False}


def module_imports(path):
    """The delft modules ``path`` imports at module level (not inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("delft"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("delft"))
    return found


def module_name(path):
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycles_between_modules():
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {name: {m for m in module_imports(path) if m in modules and m != name}
             for name, path in modules.items()}
    # a package's __init__ importing its own submodules is not a cycle of stages
    for name in graph:
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for child in graph[node]:
            if state.get(child) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack + [node, child]))
            if child not in state:
                visit(child, stack + [node])
        state[node] = "done"

    for name in graph:
        if name not in state:
            visit(name, [])


def test_no_module_over_500_lines():
    long = {str(p.relative_to(REPO_ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert not long


def test_config_file_of_the_wrong_type_or_range_is_one_line(tmp_path):
    from delft.sequenceLabelling.config import ModelConfig
    from delft.utilities.errors import ConfigurationError

    for field, value, expected in (("word_lstm_units", "abc", "must be an integer"),
                                   ("word_lstm_units", -5, "must be >= 1"),
                                   ("dropout", 2.0, "must be <= 0.99"),
                                   ("features_indices", [1, "a"], "must be a list of indices"),
                                   ("compute_dtype", "float8", "must be one of")):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({field: value}))
        with pytest.raises(ConfigurationError, match=f"{path}: {field} {expected}"):
            ModelConfig.load(str(path))
