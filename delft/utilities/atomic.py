"""Files and folders replaced whole or not at all, and the lock that serialises their writers.

A model folder is written into a hidden staging folder beside it (``.<name>.XXXXXXXX``, the shape
``tempfile.mkdtemp`` gives) and swapped with the old one in one ``renameat2(RENAME_EXCHANGE)``
system call, so that at every instant the target path is a complete model, old or new; the old one,
now at the staging path, is then removed. Staging folders of killed saves are removed by the next
save of the same model, under the lock that serialises saves (an ``fcntl.flock`` on
``.<name>.lock`` beside the target): a waiting save is never mistaken for a leftover. A target that
is a symbolic link to a folder is followed: the folder it points to is replaced, the link is kept.

Output files are written to a hidden temporary file in their destination folder and renamed over
the destination when complete (``os.replace``): a failure leaves an existing file untouched and
nothing partial. The temporary file's name holds its writer's host and process id: the next write
of the same file removes those of killed writers. Output for stdout goes to a temporary file first
and is copied to stdout once complete.

A write that finds the disk (or quota) full removes what it had written and raises
:class:`~delft.utilities.errors.DiskFullError`, one line saying what was kept.

Where the file system cannot exchange two folders (``EINVAL``: NFS, FUSE; ``ENOSYS``: not Linux),
the old folder is moved aside and the new one moved in: two renames microseconds apart, logged
once as a warning (doc/reliability.md).
"""
import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import re
import shutil
import socket
import sys
import tempfile

from delft.utilities.errors import ConfigurationError, disk_full, is_disk_full

logger = logging.getLogger(__name__)

AT_FDCWD = -100
RENAME_EXCHANGE = 2
STAGING_SUFFIX = r"\.[a-z0-9_]{8}"  # tempfile.mkdtemp's random part: 8 of [a-z0-9_]
_exchange_unsupported_warned = set()


def _file_mode(requested=0o666):
    """The mode ``open`` gives a new file (``requested=0o777``: ``os.mkdir`` a new folder) under
    the current umask; ``mkstemp``/``mkdtemp`` would give 0600/0700, hiding the output from
    others (GROBID may run as another user)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return requested & ~umask


def staging_pattern(name):
    """The names of ``name``'s staging folders: ``.<name>.`` and mkdtemp's 8 random characters.

    >>> bool(staging_pattern("date-BidLSTM_CRF").match(".date-BidLSTM_CRF.a1b2c3_d"))
    True
    >>> [bool(staging_pattern("date").match(n)) for n in ("date.checkpoints", ".date.lock")]
    [False, False]
    """
    return re.compile(rf"^\.{re.escape(name)}{STAGING_SUFFIX}$")


def resolved_target(path):
    """``path``, or the folder it links to: a symbolic link is followed, never replaced.

    A link to nothing or to a file is a one-line :class:`ConfigurationError`, as is ``path``
    being a file: a model folder is replaced whole, never written over a file.
    """
    if os.path.islink(path):
        real = os.path.realpath(path)
        if not os.path.isdir(real):
            state = "a file" if os.path.exists(real) else "missing"
            raise ConfigurationError(f"{path}: a symbolic link to {real}, which is {state}: "
                                     "point it at a folder or remove it")
        return real
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigurationError(f"{path}: is a file, where a model folder is to be written")
    return path


def check_folder_destination(path):
    """Refuse, in one line and before any work, a model folder ``path`` that cannot be written.

    ``path`` may not exist yet: its nearest existing ancestor must be a folder this process can
    create entries in (probed by creating one, which also catches read-only mounts and root
    squashing, where permission bits say nothing). Returns the folder a save will replace.
    """
    target = resolved_target(path)
    _check_can_create_in(os.path.dirname(os.path.abspath(target)), os.path.basename(target))
    return target


def check_file_destination(path):
    """Refuse, in one line and before any work, an output file ``path`` that cannot be written."""
    target = os.path.realpath(path)
    if os.path.isdir(target):
        raise ConfigurationError(f"{path}: is a folder, where an output file is to be written")
    _check_can_create_in(os.path.dirname(target), os.path.basename(target))
    return target


def _check_can_create_in(folder, name):
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ConfigurationError(f"{existing}: is a file, where a folder is expected (to hold "
                                 f"{os.path.join(folder, name)})")
    try:
        probe = tempfile.mkdtemp(prefix=f".{name}.", dir=existing)
    except OSError as error:
        raise ConfigurationError(f"{existing}: cannot write there ({error.strerror}), where "
                                 f"{os.path.join(folder, name)} is to be written") from None
    with contextlib.suppress(FileNotFoundError):  # a save holding the lock removed it
        os.rmdir(probe)


@contextlib.contextmanager
def exclusive(folder, name):
    """Hold the lock of ``name`` in ``folder`` (``.<name>.lock``); a second holder waits.

    The lock is released by the kernel when its holder dies, so a killed save never blocks the
    next one.
    """
    try:
        handle = open(os.path.join(folder, f".{name}.lock"), "a")
    except OSError as error:
        raise ConfigurationError(f"{folder}: cannot write there ({error.strerror})") from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("%s: another save of %s is in progress: waiting for it to end", folder,
                        name)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_leftovers(folder, name):
    """Remove the staging folders of saves of ``name`` that were killed (call under the lock).

    Returns their names. Only ``.<name>.XXXXXXXX`` entries are touched: ``<name>.checkpoints/``
    and every other entry stay as they are.
    """
    pattern = staging_pattern(name)
    removed = sorted(entry for entry in os.listdir(folder) if pattern.match(entry))
    for entry in removed:
        path = os.path.join(folder, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    if removed:
        logger.info("%s: removed %d folder(s) left by interrupted saves of %s", folder,
                    len(removed), name)
    return removed


def exchange(first, second):
    """Swap two existing paths in one system call; False where the file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second),
                 RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), second)


def _sync(path):
    """Flush ``path`` (a file or folder) to the disk, so that a power cut after the rename finds
    the new content, not an empty file under the new name."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(folder):
    for parent, _, names in os.walk(folder):
        for name in names:
            _sync(os.path.join(parent, name))
        _sync(parent)


def _install(staging, target):
    """Put the complete ``staging`` folder at ``target``; the old folder is removed after."""
    folder, name = os.path.split(target)
    if not os.path.lexists(target):
        os.rename(staging, target)
    elif exchange(staging, target):
        shutil.rmtree(staging, ignore_errors=True)  # the old model, now at the staging path
    else:
        if folder not in _exchange_unsupported_warned:
            _exchange_unsupported_warned.add(folder)
            logger.warning("%s: the file system cannot exchange two folders in one step: the "
                           "old model is moved aside just before the new one moves in", folder)
        aside = tempfile.mkdtemp(prefix=f".{name}.", dir=folder)
        os.rename(target, aside)  # onto an empty folder: allowed, and the name is a leftover's
        os.rename(staging, target)
        shutil.rmtree(aside, ignore_errors=True)
    _sync(folder)


@contextlib.contextmanager
def replaced_directory(path):
    """Yield a staging folder to fill; when the block ends, it replaces ``path`` in one step.

    Saves of the same folder are serialised (:func:`exclusive`), leftovers of killed saves are
    removed first, and if the block raises (or the process dies) ``path`` keeps what it held.
    A symbolic link at ``path`` is followed (:func:`resolved_target`).
    """
    target = resolved_target(path)
    folder, name = os.path.split(os.path.abspath(target))
    try:
        os.makedirs(folder, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ConfigurationError(f"{folder}: a file is in the way of this folder") from None
    except PermissionError as error:
        raise ConfigurationError(f"{folder}: cannot create it ({error.strerror})") from None
    with exclusive(folder, name):
        remove_leftovers(folder, name)
        staging = tempfile.mkdtemp(prefix=f".{name}.", dir=folder)
        try:
            os.chmod(staging, _file_mode(0o777))
            yield staging
            _sync_tree(staging)
            _install(staging, target)
        except BaseException as error:
            shutil.rmtree(staging, ignore_errors=True)
            if is_disk_full(error):
                kept = "it keeps what it held" if os.path.lexists(target) else "nothing written"
                raise disk_full(target, kept) from None
            raise


@contextlib.contextmanager
def replaced_file(path, encoding="utf-8", durable=True):
    """Yield a text stream whose content, once the block ends, replaces ``path`` in one rename.

    If the block raises, ``path`` keeps what it held and no partial file is left. With ``path``
    None the content is copied to stdout once complete (never a partial document there either).
    A symbolic link at ``path`` is followed: the file it points to is replaced. ``durable``: the
    content reaches the disk before the rename (False where a power cut may lose the file
    anyway, and only a killed process must leave it whole).
    """
    if path is None:
        with tempfile.TemporaryFile("w+", encoding=encoding) as stream:
            yield stream
            stream.seek(0)
            shutil.copyfileobj(stream, sys.stdout)
            sys.stdout.flush()
        return
    target = os.path.realpath(path)
    folder, name = os.path.split(target)
    descriptor, temporary = tempfile.mkstemp(prefix=_temporary_prefix(name), suffix=".tmp",
                                             dir=folder)
    try:
        with os.fdopen(descriptor, "w", encoding=encoding) as stream:
            yield stream
            stream.flush()
            if durable:
                os.fsync(stream.fileno())
        mode = os.stat(target).st_mode & 0o7777 if os.path.exists(target) else _file_mode()
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        if is_disk_full(error):
            kept = "it keeps what it held" if os.path.exists(target) else "nothing written"
            raise disk_full(target, kept) from None
        raise
    remove_dead_temporaries(folder, name)


def _temporary_prefix(name):
    """``.<name>.<host>-<pid>.``: whose temporary file it is, so that the next write removes the
    ones of killed processes and never another live writer's."""
    return f".{name}.{socket.gethostname()}-{os.getpid()}."


def remove_dead_temporaries(folder, name):
    """Remove the temporary files of writes of ``name`` by processes of this host that are gone
    (a kill leaves them); returns their names."""
    pattern = re.compile(rf"^\.{re.escape(name)}\.{re.escape(socket.gethostname())}-(\d+)\."
                         r"[a-z0-9_]{8}\.tmp$")
    removed = []
    for entry in os.listdir(folder):
        match = pattern.match(entry)
        if match and not _process_alive(int(match.group(1))):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, entry))
                removed.append(entry)
    if removed:
        logger.info("%s: removed %d temporary file(s) left by killed writes of %s", folder,
                    len(removed), name)
    return sorted(removed)


def _process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
