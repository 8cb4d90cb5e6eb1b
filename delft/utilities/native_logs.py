"""TensorFlow's C++ runtime writes its own lines on the process's stderr (absl's notice, CUDA
probing, CPU features: about seven before a command's first epoch, ``E0000 ... failed call to
cuInit`` on a machine without GPU), whatever ``TF_CPP_MIN_LOG_LEVEL`` says. The CLIs hold them
back (:class:`NativeStderrFilter`; ``--verbose`` shows them); the library leaves the host's
stderr alone.

>>> is_tensorflow_line("I0000 00:00:1796.902064   15199 cudart_stub.cc:31] Could not find cuda")
True
>>> tensorflow_free(["W0000 00:00:1.5  12 x.cc:3] note", "To enable the following instructions: AVX",
...                  "error: --input x: no such file"])
['error: --input x: no such file']
"""
import os
import re
import sys
import threading

TENSORFLOW_LINE = re.compile(r"^([IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]|"
                             r"WARNING: All log messages before absl::InitializeLog\(\))")
# a TensorFlow line may go on on the next ones: the CPU features it was not built for, or an
# op's context (a tab, then ``[[{{node SaveV2}}]]``), its hint and a blank line
CONTINUATIONS = ("To enable the following instructions", "\t", "Hint: If you want to see")


def is_tensorflow_line(line: str) -> bool:
    return bool(TENSORFLOW_LINE.match(line))


def continues_tensorflow(line: str, in_tensorflow: bool) -> bool:
    """Whether ``line`` is TensorFlow's, given whether the line before it was.

    >>> tab = chr(9)
    >>> continues_tensorflow(tab + " [[{{node SaveV2}}]]", True), continues_tensorflow(tab, False)
    (True, False)
    """
    return is_tensorflow_line(line) or (in_tensorflow and (
        not line.strip() or line.startswith(CONTINUATIONS)))


def tensorflow_free(lines):
    """The non-empty ``lines`` that are not TensorFlow's own runtime logging."""
    kept, in_tensorflow = [], False
    for line in lines:
        in_tensorflow = continues_tensorflow(line, in_tensorflow)
        if line.strip() and not in_tensorflow:
            kept.append(line)
    return kept


class NativeStderrFilter:
    """While in use, file descriptor 2 is a pipe whose lines go on to the real stderr, but for
    TensorFlow's: Python's own writes pass (in order), progress bars (``\\r``, no line end) pass
    as they come.

    Only a program that owns its process should use it (the CLIs do).
    """

    def __init__(self):
        self.original = None
        self.thread = None

    def __enter__(self):
        sys.stderr.flush()
        self.original = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self.thread = threading.Thread(target=self._pump, args=(read,), name="delft-stderr",
                                       daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self.original, 2)  # closes the pipe's last writer: the pump reads its end
        self.thread.join(timeout=10)
        os.close(self.original)
        return False

    def _pump(self, read):
        pending, in_tensorflow = b"", False
        with os.fdopen(read, "rb", buffering=0) as source:
            while True:
                chunk = source.read(65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    text = line.decode("utf-8", "replace")
                    in_tensorflow = continues_tensorflow(text, in_tensorflow)
                    if not in_tensorflow:
                        os.write(self.original, line + b"\n")
                if pending and not _may_start_tensorflow_line(pending):
                    os.write(self.original, pending)  # a progress bar: shown as it comes
                    pending = b""
        if pending:
            os.write(self.original, pending)


def _may_start_tensorflow_line(data: bytes) -> bool:
    """Whether an unfinished line may still turn out to be TensorFlow's (held until its end)."""
    text = data.decode("utf-8", "replace")
    return any(prefix.startswith(text[:len(prefix)]) for prefix in
               ("I0", "W0", "E0", "F0", "WARNING: All log messages", *CONTINUATIONS))
