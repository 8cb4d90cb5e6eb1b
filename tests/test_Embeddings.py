"""delft.utilities.Embeddings: formats, registry overrides, the LMDB cache (reuse, damage, killed and
concurrent builds, TensorFlow-era pickles), DeLFT's lookup semantics, and a TensorFlow-free import."""
import doctest
import gzip
import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import time
import zipfile

import lmdb
import numpy as np
import pytest

from delft.utilities import Embeddings as embeddings_module
from delft.utilities import embedding_cache
from delft.utilities.Embeddings import Embeddings, normalize_num
from delft.utilities.errors import ConfigurationError, DataFormatError
from delft.utilities.data_path import REPO_ROOT

WORDS = ["the", "June", "0000", "Straße", "了", "a.b"]
_LETTERS = str.maketrans("0123456789", "abcdefghij")


def numbered_words(count):
    """Distinct words without digits (digits would be normalised away by the model lookup)."""
    return ["w" + str(i).translate(_LETTERS) for i in range(count)]


def make_vectors(count, dim, seed=0):
    return np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)


def write_text(path, words, vectors, header=True, trailing_space=False, newline="\n"):
    """A word2vec/fastText (header) or GloVe (no header) text file; '%.9g' round-trips float32."""
    lines = [f"{len(words)} {vectors.shape[1]}"] if header else []
    tail = " " if trailing_space else ""
    lines += [w + " " + " ".join("%.9g" % v for v in row) + tail for w, row in zip(words, vectors)]
    data = (newline.join(lines) + newline).encode("utf-8")
    if str(path).endswith(".gz"):
        with gzip.open(path, "wb") as stream:
            stream.write(data)
    elif str(path).endswith(".zip"):
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("inner.vec", data)
    else:
        path.write_bytes(data)
    return path


def write_bin(path, words, vectors):
    """word2vec binary: header line, then 'word' + space + little-endian float32 + newline."""
    data = f"{len(words)} {vectors.shape[1]}\n".encode()
    data += b"".join(w.encode() + b" " + row.astype("<f4").tobytes() + b"\n"
                     for w, row in zip(words, vectors))
    path.write_bytes(gzip.compress(data) if str(path).endswith(".gz") else data)
    return path


def registry_for(tmp_path, source, name="test-emb", fmt=None, **extra):
    entry = {"name": name, "path": str(source), "type": "glove", "lang": "en", "item": "word"}
    if fmt:
        entry["format"] = fmt
    return {"embedding-lmdb-path": str(tmp_path / "db"), "embeddings": [entry], **extra}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    monkeypatch.delenv("DELFT_RESOURCE_REGISTRY", raising=False)
    monkeypatch.delenv("DELFT_EMBEDDING_LMDB_PATH", raising=False)
    yield
    for key in list(embedding_cache._envs):
        embedding_cache.close_env(key)


def test_doctests():
    for module in (embeddings_module, embedding_cache):
        assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("filename,writer,kwargs", [
    ("e.vec", write_text, {}),
    ("e.txt", write_text, {"header": False}),
    ("e.vec", write_text, {"trailing_space": True, "newline": "\r\n"}),
    ("e.vec.gz", write_text, {}),
    ("e.zip", write_text, {}),
    ("e.bin", write_bin, {}),
    ("e.bin.gz", write_bin, {}),
])
def test_formats_give_the_same_vectors_from_the_cache_and_in_memory(tmp_path, filename, writer, kwargs):
    vectors = make_vectors(len(WORDS), 7)
    source = writer(tmp_path / filename, WORDS, vectors, **kwargs)
    registry = registry_for(tmp_path, source)
    for use_cache in (True, False):
        emb = Embeddings("test-emb", resource_registry=registry, use_cache=use_cache)
        assert (emb.vocab_size, emb.embed_size) == (len(WORDS), 7)
        found = emb.get_word_vectors(WORDS)
        assert found.dtype == np.float32 and np.array_equal(found, vectors)
        assert (emb.cache_path is not None) == use_cache
    assert emb.extension == ("bin" if ".bin" in filename else "vec")


def test_glove_words_with_spaces_keep_their_vector(tmp_path):
    vectors = make_vectors(3, 5)
    source = write_text(tmp_path / "g.txt", ["a", ". . .", "1 000"], vectors, header=False)
    emb = Embeddings("test-emb", resource_registry=registry_for(tmp_path, source))
    assert np.array_equal(emb.get_word_vectors(["a", ". . .", "1 000"], normalize_digits=False), vectors)


def test_unknown_words_are_zeros_and_there_is_no_lowercase_fallback(tmp_path):
    vectors = make_vectors(len(WORDS), 4)
    source = write_text(tmp_path / "e.vec", WORDS, vectors)
    emb = Embeddings("test-emb", resource_registry=registry_for(tmp_path, source))
    for word in ("june", "THE", "absent", "", "x" * 600, "\ud800"):
        vector = emb.get_word_vector(word)
        assert vector.dtype == np.float32 and vector.shape == (4,) and not vector.any()
        assert word not in emb
    assert "June" in emb and np.array_equal(emb.get_word_vector("June"), vectors[1])
    assert emb.get_word_vectors([]).shape == (0, 4)


def test_digits_are_normalised_for_the_model_lookup_as_in_delft_and_grobid(tmp_path):
    vectors = make_vectors(len(WORDS), 4)
    source = write_text(tmp_path / "e.vec", WORDS, vectors)
    emb = Embeddings("test-emb", resource_registry=registry_for(tmp_path, source))
    assert normalize_num("1999-２０２４") == "0000-0000"
    batch = emb.get_word_vectors(["2024", "９９９９", "June", "2024"])
    assert np.array_equal(batch, vectors[[2, 2, 1, 2]])
    assert np.array_equal(emb.get_word_vectors(["a\x00b", "2024"]), np.stack([np.zeros(4), vectors[2]]))
    # DeLFT's get_word_vector looks the word up as given; its callers normalise
    assert not emb.get_word_vector("2024").any()
    assert np.array_equal(emb.get_word_vector("2024", normalize_digits=True), vectors[2])


def test_wiki_fr_words_are_lowercased_as_in_delft(tmp_path):
    vectors = make_vectors(2, 3)
    source = write_text(tmp_path / "fr.vec", ["juin", "mai"], vectors)
    emb = Embeddings("wiki.fr", resource_registry=registry_for(tmp_path, source, name="wiki.fr"))
    assert np.array_equal(emb.get_word_vector("Juin"), vectors[0])


def test_registry_from_argument_path_and_environment(tmp_path, monkeypatch):
    vectors = make_vectors(len(WORDS), 3)
    source = write_text(tmp_path / "e.vec", WORDS, vectors)
    registry_file = tmp_path / "registry.json"
    registry_file.write_text(json.dumps(registry_for(tmp_path, source, name="from-file")))
    assert Embeddings("from-file", resource_registry=str(registry_file)).vocab_size == len(WORDS)
    monkeypatch.setenv("DELFT_RESOURCE_REGISTRY", str(registry_file))
    assert Embeddings("from-file").vocab_size == len(WORDS)
    with pytest.raises(ConfigurationError, match="glove-840B"):
        Embeddings("glove-840B")  # the shipped registry is replaced, not merged
    monkeypatch.setenv("DELFT_RESOURCE_REGISTRY", str(tmp_path / "absent.json"))
    with pytest.raises(ConfigurationError, match="DELFT_RESOURCE_REGISTRY"):
        Embeddings("from-file")


def test_shipped_registry_has_delfts_shape():
    registry = embeddings_module.load_resource_registry()
    assert registry["embedding-lmdb-path"] == "data/db"
    names = {entry["name"] for entry in registry["embeddings"]}
    assert {"glove-840B", "fasttext-crawl"} <= names
    for entry in registry["embeddings"]:
        assert {"name", "path", "type", "format", "lang", "item"} <= set(entry)


def test_relative_paths_and_lmdb_path_environment(tmp_path, monkeypatch):
    vectors = make_vectors(len(WORDS), 3)
    (tmp_path / "emb").mkdir()
    write_text(tmp_path / "emb" / "e.vec", WORDS, vectors)
    monkeypatch.chdir(tmp_path)
    registry = {"embedding-lmdb-path": "data/db",
                "embeddings": [{"name": "rel", "path": "emb/e.vec", "format": "vec"}]}
    assert Embeddings("rel", resource_registry=registry).cache_path == os.path.join("data/db", "rel")
    assert (tmp_path / "data" / "db" / "rel" / "data.mdb").is_file()
    monkeypatch.setenv("DELFT_EMBEDDING_LMDB_PATH", str(tmp_path / "elsewhere"))
    emb = Embeddings("rel", resource_registry=registry)
    assert emb.cache_path == str(tmp_path / "elsewhere" / "rel") and os.path.isdir(emb.cache_path)


def test_no_lmdb_path_loads_in_memory(tmp_path):
    vectors = make_vectors(len(WORDS), 3)
    source = write_text(tmp_path / "e.vec", WORDS, vectors)
    registry = registry_for(tmp_path, source)
    registry["embedding-lmdb-path"] = "None"
    emb = Embeddings("test-emb", resource_registry=registry)
    assert emb.cache_path is None and not (tmp_path / "db").exists()
    assert np.array_equal(emb.get_word_vectors(WORDS), vectors)


def test_cache_is_reused_without_the_source_and_logs_not_prints(tmp_path, capsys, caplog):
    vectors = make_vectors(len(WORDS), 5)
    source = write_text(tmp_path / "e.vec", WORDS, vectors)
    registry = registry_for(tmp_path, source)
    with caplog.at_level(logging.INFO, logger="delft"):
        Embeddings("test-emb", resource_registry=registry).close()
    assert "cache built" in caplog.text
    assert capsys.readouterr().out == ""
    source.rename(tmp_path / "moved.vec")
    emb = Embeddings("test-emb", resource_registry=registry)
    assert np.array_equal(emb.get_word_vectors(WORDS), vectors)


def test_a_changed_source_rebuilds_the_cache(tmp_path, caplog):
    source = write_text(tmp_path / "e.vec", WORDS, make_vectors(len(WORDS), 5))
    registry = registry_for(tmp_path, source)
    Embeddings("test-emb", resource_registry=registry).close()
    new = make_vectors(len(WORDS), 5, seed=1)
    write_text(source, WORDS, new)
    os.utime(source, ns=(time.time_ns(), time.time_ns() + 10**9))
    with caplog.at_level(logging.WARNING, logger="delft"):
        emb = Embeddings("test-emb", resource_registry=registry)
    assert "changed" in caplog.text
    assert np.array_equal(emb.get_word_vectors(WORDS), new)


def build_cache(tmp_path, count=200, dim=12):
    words = numbered_words(count)
    vectors = make_vectors(count, dim)
    source = write_text(tmp_path / "e.vec", words, vectors)
    registry = registry_for(tmp_path, source)
    Embeddings("test-emb", resource_registry=registry).close()
    return registry, words, vectors, tmp_path / "db" / "test-emb"


def load_after_damage(registry, caplog, words, vectors, expected):
    with caplog.at_level(logging.WARNING, logger="delft"):
        emb = Embeddings("test-emb", resource_registry=registry)
    assert expected in caplog.text and "rebuilding" in caplog.text
    assert np.array_equal(emb.get_word_vectors(words), vectors)


def test_truncated_cache_is_rebuilt(tmp_path, caplog):
    registry, words, vectors, cache = build_cache(tmp_path)
    data = cache / "data.mdb"
    with open(data, "r+b") as stream:
        stream.truncate(os.path.getsize(data) // 2)
    load_after_damage(registry, caplog, words, vectors, "truncated")


def test_cache_not_matching_its_record_or_with_a_bad_record_is_rebuilt(tmp_path, caplog):
    registry, words, vectors, cache = build_cache(tmp_path)
    record = json.loads((cache / "delft-cache.json").read_text())
    (cache / "delft-cache.json").write_text(json.dumps({**record, "words": 5}))
    load_after_damage(registry, caplog, words, vectors, "does not match its completeness record")
    embedding_cache.close_env(str(cache))
    (cache / "delft-cache.json").write_text("{not json")
    load_after_damage(registry, caplog, words, vectors, "unreadable")


def test_unreadable_lmdb_file_is_rebuilt(tmp_path, caplog):
    registry, words, vectors, cache = build_cache(tmp_path)
    (cache / "data.mdb").write_bytes(b"garbage" * 100)
    load_after_damage(registry, caplog, words, vectors, "not usable")


def write_raw_lmdb(path, items):
    path.parent.mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(path), map_size=1 << 26)
    with env.begin(write=True) as txn:
        for key, value in items:
            txn.put(key.encode(), value)
    env.close()


def test_partial_build_at_the_final_path_is_not_taken_for_complete(tmp_path, caplog):
    """What an interrupted in-place build (not ours) leaves: few entries, no record."""
    registry, words, vectors, cache = build_cache(tmp_path)
    embedding_cache.close_env(str(cache))
    for name in os.listdir(cache):
        os.remove(cache / name)
    write_raw_lmdb(cache, [(w, v.tobytes()) for w, v in zip(words[:30], vectors)])
    load_after_damage(registry, caplog, words, vectors, "no completeness record")


def test_inconsistent_value_lengths_are_rebuilt(tmp_path, caplog):
    registry, words, vectors, cache = build_cache(tmp_path)
    embedding_cache.close_env(str(cache))
    for name in os.listdir(cache):
        os.remove(cache / name)
    items = [(w, v.tobytes()) for w, v in zip(words, vectors)]
    items[0] = (items[0][0], items[0][1][:-3])
    write_raw_lmdb(cache, items)
    load_after_damage(registry, caplog, words, vectors, "inconsistent")


def test_a_delft_1x_cache_without_our_record_is_used_as_is(tmp_path):
    words = numbered_words(150)
    vectors = make_vectors(150, 16)
    write_raw_lmdb(tmp_path / "db" / "legacy-free", [(w, v.tobytes()) for w, v in zip(words, vectors)])
    registry = registry_for(tmp_path, tmp_path / "absent.vec", name="legacy-free")
    emb = Embeddings("legacy-free", resource_registry=registry)
    assert (emb.vocab_size, emb.embed_size) == (150, 16)
    assert np.array_equal(emb.get_word_vectors(words), vectors)
    assert not (tmp_path / "db" / "legacy-free" / "delft-cache.json").exists()  # left untouched


def test_pickled_tensorflow_era_cache_is_never_unpickled(tmp_path, monkeypatch, caplog):
    words = numbered_words(150)
    vectors = make_vectors(150, 16)
    cache = tmp_path / "db" / "test-emb"
    write_raw_lmdb(cache, [(w, pickle.dumps(v)) for w, v in zip(words, vectors)])

    def refuse(*args, **kwargs):
        raise AssertionError("pickle.loads called on cache bytes")
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    missing = registry_for(tmp_path, tmp_path / "absent.vec")
    with pytest.raises(ConfigurationError, match="pickled") as error:
        Embeddings("test-emb", resource_registry=missing)
    assert "\n" not in str(error.value)
    source = write_text(tmp_path / "e.vec", words, vectors)
    load_after_damage(registry_for(tmp_path, source), caplog, words, vectors, "pickled")


def test_malformed_lines_name_file_and_line(tmp_path):
    cases = {
        "count.vec": "2 3\nJune 1 2 3\nMay 1 2\n",
        "number.txt": "June 1 2 3\nMay 1 x 3\n",
        "nan.txt": "June 1 2 3\nMay 1 nan 3\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        line = 3 if name == "count.vec" else 2
        for use_cache in (True, False):
            registry = registry_for(tmp_path, tmp_path / name, name=name.replace(".", "-"))
            with pytest.raises(DataFormatError, match=rf"{name.replace('.', '[.]')}:{line}: "):
                Embeddings(name.replace(".", "-"), resource_registry=registry, use_cache=use_cache)
    (tmp_path / "latin1.vec").write_bytes("1 2\ncafé 1 2\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"latin1[.]vec:2: not UTF-8"):
        Embeddings("l", resource_registry=registry_for(tmp_path, tmp_path / "latin1.vec", name="l"))
    assert not [p for p in os.listdir(tmp_path / "db") if not p.endswith(".build-lock")]


def test_truncated_binary_and_fasttext_model_files(tmp_path):
    source = write_bin(tmp_path / "e.bin", WORDS, make_vectors(len(WORDS), 4))
    source.write_bytes(source.read_bytes()[:-10])
    with pytest.raises(DataFormatError, match=r"e[.]bin:6: the file ends inside record 6"):
        Embeddings("test-emb", resource_registry=registry_for(tmp_path, source))
    model = tmp_path / "wiki.en.bin"
    model.write_bytes((793712314).to_bytes(4, "little") + b"\x0c\x00\x00\x00" * 8)
    with pytest.raises(ConfigurationError, match="fastText model"):
        Embeddings("m", resource_registry=registry_for(tmp_path, model, name="m", fmt="bin"))


def test_configuration_errors_name_the_entry(tmp_path):
    registry = registry_for(tmp_path, tmp_path / "absent.vec")
    with pytest.raises(ConfigurationError, match=r"'test-emb'.*absent[.]vec.*does not exist"):
        Embeddings("test-emb", resource_registry=registry)
    with pytest.raises(ConfigurationError, match="'other' are not in the registry given"):
        Embeddings("other", resource_registry=registry)
    registry["embeddings"][0]["format"] = "contextual-transformer"
    with pytest.raises(ConfigurationError, match="not supported"):
        Embeddings("test-emb", resource_registry=registry)
    with pytest.raises(ConfigurationError, match="not a path"):
        Embeddings("../x", resource_registry=registry)


def test_an_unwritable_cache_location_is_a_one_line_error(tmp_path):
    source = write_text(tmp_path / "e.vec", WORDS, make_vectors(len(WORDS), 3))
    (tmp_path / "db" / "test-emb.build-lock").mkdir(parents=True)  # stands for any OSError
    with pytest.raises(ConfigurationError, match="cannot be built"):
        Embeddings("test-emb", resource_registry=registry_for(tmp_path, source))


def test_load_false_then_delfts_make_embeddings_simple(tmp_path):
    vectors = make_vectors(len(WORDS), 3)
    source = write_text(tmp_path / "e.vec", WORDS, vectors)
    emb = Embeddings("other", resource_registry=registry_for(tmp_path, source), load=False)
    assert (emb.embed_size, emb.vocab_size) == (0, 0)
    emb.make_embeddings_simple("test-emb")
    assert emb.name == "test-emb" and np.array_equal(emb.get_word_vectors(WORDS), vectors)
    assert pickle.loads(pickle.dumps(emb)).get_word_vectors(WORDS).shape == (len(WORDS), 3)


def run_python(code, cwd, **kwargs):
    env = {k: v for k, v in os.environ.items() if k != "DELFT_CPU_REPLICAS"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.Popen([sys.executable, "-c", code], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


LOAD_CODE = """
import json, logging
logging.basicConfig(level=logging.INFO)
from delft.utilities.Embeddings import Embeddings
emb = Embeddings("test-emb", resource_registry=json.load(open("registry.json")))
print(emb.vocab_size, emb.embed_size, float(emb.get_word_vectors(["wh"]).sum()))
"""


def big_source(tmp_path, count, dim):
    """A file of ``count`` words whose vectors cycle through 1000 (formatting them all is slow)."""
    words = numbered_words(count)
    base = make_vectors(1000, dim)
    rows = [" ".join("%.9g" % v for v in row) for row in base]
    source = tmp_path / "big.vec"
    source.write_text(f"{count} {dim}\n" + "".join(f"{w} {rows[i % 1000]}\n" for i, w in enumerate(words)))
    vectors = base[np.arange(count) % 1000]
    (tmp_path / "registry.json").write_text(json.dumps(registry_for(tmp_path, source)))
    return words, vectors


def test_killed_build_is_not_taken_for_complete(tmp_path):
    words, vectors = big_source(tmp_path, 80000, 100)
    builder = run_python(LOAD_CODE, tmp_path)
    db = tmp_path / "db"
    deadline = time.time() + 120
    while time.time() < deadline and builder.poll() is None and not list(db.glob("test-emb.partial-*")):
        time.sleep(0.05)
    time.sleep(0.5)  # into the parsing and writing
    assert builder.poll() is None, "the build ended before it could be killed"
    builder.send_signal(signal.SIGKILL)
    builder.wait()
    assert not (db / "test-emb").exists() and list(db.glob("test-emb.partial-*"))
    emb = Embeddings("test-emb", resource_registry=json.loads((tmp_path / "registry.json").read_text()))
    assert emb.vocab_size == len(words)
    assert np.array_equal(emb.get_word_vectors(words[-5:]), vectors[-5:])
    assert not list(db.glob("test-emb.partial-*"))  # the dead build's directory is cleaned up


def test_concurrent_builders_end_with_one_valid_cache(tmp_path):
    words, vectors = big_source(tmp_path, 20000, 50)
    builders = [run_python(LOAD_CODE, tmp_path) for _ in range(2)]
    outputs = [builder.communicate(timeout=300) for builder in builders]
    for builder, (out, err) in zip(builders, outputs):
        assert builder.returncode == 0, err
        count, dim, total = out.split()
        assert (int(count), int(dim)) == (20000, 50)
        assert float(total) == pytest.approx(float(vectors[7].sum()), rel=1e-5)
    assert sum("cache built" in err for _, err in outputs) == 1
    db = tmp_path / "db"
    assert sorted(p.name for p in db.iterdir()) == ["test-emb", "test-emb.build-lock"]
    assert embedding_cache.inspect(str(db / "test-emb")).problem is None


def test_import_does_not_import_tensorflow(tmp_path):
    probe = run_python("import sys\nfrom delft.utilities.Embeddings import Embeddings\n"
                       "print(sorted(m for m in ('tensorflow', 'keras', 'torch') if m in sys.modules))",
                       tmp_path)
    out, err = probe.communicate(timeout=120)
    assert probe.returncode == 0, err
    assert out.strip() == "[]"
