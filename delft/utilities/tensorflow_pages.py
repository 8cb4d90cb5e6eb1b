"""TensorFlow, imported without keeping resident the library pages only its start-up reads.

Loading ``libtensorflow_cc`` runs the static initialisers of every op and kernel TensorFlow has;
they and the symbol tables read with them leave about 300 MB of the library's file pages mapped
in the process, where they count in its RSS although the process never reads them again. A
tagging process peaked at 0.74 GB, against 0.46 GB with those pages handed back (doc/usage.md,
"Memory"): running a model reads back about 50 MB of them.

So :func:`import_tensorflow`, where delft starts TensorFlow, loads its two native libraries
first when TensorFlow is not imported yet, hands their pages back to the kernel
(``madvise(MADV_PAGEOUT)``), imports ``tensorflow``, and hands back once more what the import
read (the only step left when the host imported TensorFlow itself, as GROBID 0.8's start-up
does with ``import keras.backend``). Only read-only file mappings of TensorFlow's own folder are
touched: any of their pages is read again from the file when needed. The kernel keeps the pages
another process maps too. Where none of it can work (no Linux ``/proc``, another package layout,
a kernel without ``MADV_PAGEOUT``) it is a plain ``import tensorflow``.

>>> tf = import_tensorflow()
>>> tf.__name__
'tensorflow'
"""
import ctypes
import importlib.util
import logging
import os
import sys

logger = logging.getLogger(__name__)

MADV_PAGEOUT = 21  # linux/mman.h, Linux 5.4 and later
# in the order the dynamic linker loads them: the framework library is the other's dependency
NATIVE_LIBRARIES = ("libtensorflow_framework.so.2", "libtensorflow_cc.so.2")
MAPS_FILE = "/proc/self/maps"
_handed_back = False  # once a process: later imports find the pages they need resident


def tensorflow_folder():
    """The folder of the installed ``tensorflow`` package, found without importing it; ``None``
    when it is not installed."""
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def read_only_file_mappings(maps_lines, folder):
    """``(start, length)`` of each read-only mapping of a file under ``folder``, from the lines of
    ``/proc/<pid>/maps``: the only mappings whose pages are all the file's, never written.

    >>> read_only_file_mappings(["7f00-7f10 r-xp 00000000 08:01 42 /tf/lib.so",
    ...                          "7f10-7f20 rw-p 00010000 08:01 42 /tf/lib.so",
    ...                          "7f20-7f30 r--p 00000000 08:01 43 /other/lib.so",
    ...                          "7f30-7f40 rw-p 00000000 00:00 0"], "/tf")
    [(32512, 16)]
    """
    prefix = folder.rstrip(os.sep) + os.sep
    mappings = []
    for line in maps_lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or "w" in fields[1] or not fields[5].strip().startswith(prefix):
            continue
        start, end = (int(address, 16) for address in fields[0].split("-"))
        mappings.append((start, end - start))
    return mappings


def release_pages(folder):
    """Hand back to the kernel the resident pages of the read-only mappings of files under
    ``folder``; returns how many mappings were advised (0 where it cannot be done)."""
    try:
        with open(MAPS_FILE) as maps:
            mappings = read_only_file_mappings(maps, folder)
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for advised, (start, length) in enumerate(mappings):
        if madvise(start, length, MADV_PAGEOUT) != 0:
            # EINVAL: a kernel before 5.4; the other mappings would be refused too
            logger.debug("madvise(MADV_PAGEOUT) refused: %s", os.strerror(ctypes.get_errno()))
            return advised
    return len(mappings)


def preload_native_libraries(folder):
    """Load TensorFlow's native libraries from its ``folder`` (before its Python modules), as its
    own loader would: whether they loaded (where they did not, the import that follows reports
    why)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        for name in NATIVE_LIBRARIES:
            # RTLD_LOCAL, as TensorFlow's loader opens them: its import then finds them loaded
            ctypes.CDLL(os.path.join(folder, name))
    except OSError as error:
        logger.debug("TensorFlow's libraries not preloaded: %s", error)
        return False
    return True


def import_tensorflow():
    """``import tensorflow`` (the module is returned), its start-up pages handed back: by loading
    its libraries first when this call starts it, and once after the import either way (see the
    module's docstring)."""
    global _handed_back
    folder = None if _handed_back else tensorflow_folder()
    if folder is not None and "tensorflow" not in sys.modules and \
            preload_native_libraries(folder):
        release_pages(folder)
    import tensorflow

    if folder is not None:
        _handed_back = True
        logger.debug("TensorFlow started: the pages of %d read-only mappings of its libraries "
                     "handed back", release_pages(folder))
    return tensorflow
