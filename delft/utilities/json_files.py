"""JSON files of model folders and registries, read whole or refused in one line: too large to be
one (checked before parsing), not UTF-8 or not JSON (its line), nested too deep (Python's parser
would raise ``RecursionError``), not an object.

>>> import tempfile
>>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as out:
...     _ = out.write("[" * 100000 + "]" * 100000)
>>> read_json_object(out.name)
Traceback (most recent call last):
...
delft.utilities.errors.ModelLoadError: ...: corrupt (nested too deep)
"""
import json
import os

from delft.utilities.errors import ModelLoadError

# a model folder's config.json or preprocessor.json is a few KB (GROBID's largest preprocessor.json:
# 50 KB); a registry is smaller still
LARGEST_JSON = 64 * 1024 * 1024


def read_json_object(path, error=ModelLoadError, largest=LARGEST_JSON):
    """The JSON object (a dict) of the file ``path``; a missing file raises
    ``FileNotFoundError``, anything else wrong one line of ``error`` naming the file."""
    size = os.path.getsize(path)
    if size > largest:
        raise error(f"{path}: {size} bytes, over the {largest // 2 ** 20} MB a file of this "
                    "kind can be: not read")
    try:
        with open(path, encoding="utf-8") as stream:
            values = json.load(stream)
    except json.JSONDecodeError as decode_error:
        raise error(f"{path}: corrupt (line {decode_error.lineno}: {decode_error.msg})") from None
    except UnicodeDecodeError as decode_error:
        raise error(f"{path}: corrupt (not UTF-8: {decode_error.reason})") from None
    except RecursionError:
        raise error(f"{path}: corrupt (nested too deep)") from None
    if not isinstance(values, dict):
        raise error(f"{path}: corrupt (not a JSON object)")
    return values
