"""TensorFlow started without keeping resident the library pages only its start-up reads
(delft/utilities/tensorflow_pages.py): which mappings are handed back, that the kernel drops
their pages and reads them again when used, and that the ways a user starts TensorFlow through
delft's API and commands all go through it.

The drop itself is checked on a file of the test's own: the kernel keeps a page that another
process maps too, and the pytest worker running this maps TensorFlow's libraries already.
``benchmarks/tagging_throughput.py`` measures what it gives a tagging process."""
import json
import mmap
import os
import subprocess
import sys

import pytest

from conftest import MODEL_NAME, REPO_ROOT, SAMPLE_DATE, subprocess_env
from delft.utilities.tensorflow_pages import read_only_file_mappings, release_pages


@pytest.mark.parametrize("line, expected", [
    ("7f00-7f10 r-xp 00000000 08:01 42   /tf/lib.so", [(0x7f00, 0x10)]),
    ("7f00-7f10 r--p 00000000 08:01 42 /tf/sub/lib.so", [(0x7f00, 0x10)]),
    ("7f00-7f10 r--s 00000000 08:01 42 /tf/data", [(0x7f00, 0x10)]),
    ("7f00-7f10 rw-p 00010000 08:01 42 /tf/lib.so", []),   # written pages: not the file's
    ("7f00-7f10 rwxp 00010000 08:01 42 /tf/lib.so", []),
    ("7f00-7f10 r--p 00000000 08:01 43 /tfx/lib.so", []),  # another folder sharing the prefix
    ("7f00-7f10 r--p 00000000 08:01 43 /other/tf/lib.so", []),
    ("7f00-7f10 r--p 00000000 00:00 0", []),                # anonymous
    ("7f00-7f10 r--p 00000000 00:00 0 [vvar]", []),
    ("7f00-7f10 r--p 00000000 08:01 42 /tf/lib.so (deleted)", [(0x7f00, 0x10)]),
    ("", []),
])
def test_only_read_only_mappings_of_files_in_the_folder_are_taken(line, expected):
    assert read_only_file_mappings([line], "/tf") == expected
    assert read_only_file_mappings([line], "/tf/") == expected


def resident_kb(path):
    """The resident kB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, current = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header
                current = len(fields) > 5 and fields[5] == path
            elif current and fields[0] == "Rss:":
                total += int(fields[1])
    return total


def test_read_only_pages_are_dropped_and_read_back_and_written_ones_kept(tmp_path):
    size = 8 << 20
    read_only, written = tmp_path / "library.so", tmp_path / "data.bin"
    content = os.urandom(size)
    for path in (read_only, written):  # on disk, as a library's pages are: clean
        with open(path, "wb") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
    with open(read_only, "rb") as first, open(written, "r+b") as second:
        library = mmap.mmap(first.fileno(), 0, prot=mmap.PROT_READ)
        private = mmap.mmap(second.fileno(), 0, flags=mmap.MAP_PRIVATE,
                            prot=mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            for offset in range(0, size, mmap.PAGESIZE):
                library[offset]
                private[offset] = 1
            assert resident_kb(str(read_only)) == size // 1024
            assert release_pages(str(tmp_path)) == 1
            assert resident_kb(str(read_only)) < size // 1024 // 10
            assert resident_kb(str(written)) == size // 1024
            assert library[:] == content  # read again from the file
            assert resident_kb(str(read_only)) == size // 1024
        finally:
            library.close()
            private.close()


def test_a_folder_nothing_maps_is_no_work(tmp_path):
    assert release_pages(str(tmp_path)) == 0


# Each scenario in a fresh process: a finder notes whether the first import of ``tensorflow``
# comes from import_tensorflow (whose preloading hands back the start-up pages).
FIRST_IMPORT = r'''
import importlib.abc, json, sys, traceback
first = []

class FirstImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" and not first:
            first.append([f"{frame.filename}:{frame.lineno}" for frame in traceback.extract_stack()
                          if "/delft/" in frame.filename])

sys.meta_path.insert(0, FirstImport())
exec(sys.argv[1])
stack = first[0] if first else []
print(json.dumps({"started": bool(first),
                  "through_import_tensorflow": any("tensorflow_pages.py" in f for f in stack),
                  "stack": stack}))
'''

TINY_DATE = "x = [['12', 'May', '2019'], ['May', '3'], ['2020'], ['1', 'June']] * 5\n" \
    "y = [['I-<day>', 'I-<month>', 'I-<year>'], ['I-<month>', 'I-<day>'], ['I-<year>'], " \
    "['I-<day>', 'I-<month>']] * 5\n"
SCENARIOS = {
    "sequence_load_and_tag": "from delft.sequenceLabelling import Sequence\n"
                             f"model = Sequence('{MODEL_NAME}')\n"
                             "model.load(dir_path=sys.argv[2])\n"
                             "model.tag([['12', 'May', '2019']], None)\n",
    "sequence_train": TINY_DATE +
                      "from delft.sequenceLabelling import Sequence\n"
                      "Sequence('tiny', max_epoch=1, batch_size=4).train(x, y)\n",
    "classifier_train": "from delft.textClassification import Classifier\n"
                        "from delft.textClassification.reader import one_hot\n"
                        "classes = ['a', 'b']\n"
                        "model = Classifier('tiny', list_classes=classes, max_epoch=1, maxlen=6,"
                        " batch_size=4)\n"
                        "model.train(['one text', 'another one'] * 6,"
                        " one_hot(['a', 'b'] * 6, classes))\n",
    "tagger_command": "from delft.applications import grobidTagger\n"
                      "grobidTagger.main(['date', 'eval', '--input', sys.argv[3], '--input-model',"
                      f" sys.argv[2] + '/{MODEL_NAME}'])\n",
    "export_api": "import tempfile\n"
                  "from delft.export import export_model\n"
                  f"export_model(sys.argv[2] + '/{MODEL_NAME}', tempfile.mkdtemp() + '/exported',"
                  " 'savedmodel')\n",
    "export_command": "import tempfile\n"
                      "from delft.applications import export\n"
                      f"export.main([sys.argv[2] + '/{MODEL_NAME}', '--format', 'savedmodel',"
                      " '--output', tempfile.mkdtemp() + '/exported'])\n",
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_api_starts_tensorflow_through_import_tensorflow(scenario, trained_date):
    done = subprocess.run([sys.executable, "-c", FIRST_IMPORT, SCENARIOS[scenario],
                           str(trained_date.models_dir), str(SAMPLE_DATE)], cwd=str(REPO_ROOT),
                          env=subprocess_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["started"] and result["through_import_tensorflow"], result["stack"]
