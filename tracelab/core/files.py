"""Writing files without ever losing what is there: atomic replacement through a temporary file
that only this process could have created.

A temporary name derived from the target (`.report.html.tmp`) can be planted in advance, as a
symlink to a file elsewhere; writing through it would overwrite that file. So the temporary
file is made with `tempfile.mkstemp` in the target's directory (O_CREAT | O_EXCL: a fresh,
unguessable name that never follows a link), filled, and renamed over the target. The rename
replaces the target's directory entry, so a target that is itself a symlink is replaced, not
written through. Whatever fails on the way, the temporary file is removed and the target is
left as it was.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Iterator, Optional, Union

from tracelab.core.printable import INVISIBLE

Data = Union[str, bytes]


def _default_mode() -> int:
    """What open() would give a new file: mkstemp makes it 0600, a report is for sharing."""
    return 0o666 & folder_mode()


def _set_default_mode(fd: int, path: str) -> None:
    """Give the new file `fd` (at `path`, which this process just created) the default mode;
    Windows has no os.fchmod, and its os.chmod only sets the read-only flag."""
    if hasattr(os, "fchmod"):
        os.fchmod(fd, _default_mode())
    else:
        os.chmod(path, _default_mode())


def folder_mode() -> int:
    """What mkdir would give a new folder (mkdtemp makes it 0700)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o777 & ~umask


@contextlib.contextmanager
def atomic_path(path: Union[str, os.PathLike]) -> Iterator[Path]:
    """A fresh temporary path beside `path` to write; renamed over `path` when the block ends
    without an exception, removed otherwise."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{short_name(path.name)}.",
                               suffix=".tmp")
    try:
        _set_default_mode(fd, tmp)
    finally:
        os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# A folder built beside its target (`building_folder`) is named after its lock file, which
# ends in this suffix and is held for as long as the build runs.
_LOCK = ".lock"
# The bytes of a target's name that a temporary name beside it repeats: with what mkstemp and
# the suffixes add, the name stays within the 255 bytes a file name may take.
_NAME_BYTES = 160


def short_name(name: str) -> str:
    """`name` cut to at most _NAME_BYTES bytes, at a character's end."""
    cut = name[:64]
    while len(os.fsencode(cut)) > _NAME_BYTES:
        cut = cut[:-1]
    return cut


@contextlib.contextmanager
def building_folder(target: Path, kind: str) -> Iterator[Path]:
    """A fresh hidden folder beside `target` (`.NAME.XXXXXXXX<kind>`) to build it in, removed
    when the block ends: the caller renames it into place first. While the block runs, a lock
    file beside it is held; a build whose process died (killed, the machine rebooted) leaves a
    folder whose lock anyone can take, and the next build beside it removes that folder first.
    Where files cannot be locked (Windows, some network file systems), the build runs the same
    and such leftovers stay."""
    parent = target.parent
    remove_abandoned(parent, kind)
    fd, lock = tempfile.mkstemp(dir=parent, prefix=f".{short_name(target.name)}.",
                                suffix=kind + _LOCK)
    try:
        _lock(fd, wait=True)
        folder = Path(lock[:-len(_LOCK)])
        os.mkdir(folder)
        try:
            os.chmod(folder, folder_mode())
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)  # lets go of the lock, after the folder and its lock file are gone


def remove_abandoned(parent: Path, kind: str) -> None:
    """Remove the folders in `parent` that building_folder made for a build whose process
    died: those named as it names them, beside an empty lock file that no process holds. A
    link, a FIFO or anything else is never opened beyond a look, nor followed."""
    if _fcntl is None:
        return
    made = re.compile(r"\..*\.[a-z0-9_]{8}" + re.escape(kind + _LOCK), re.ASCII | re.DOTALL)
    try:
        names = [n for n in os.listdir(parent) if made.fullmatch(n)]
        device = os.stat(parent).st_dev
    except OSError:
        return
    for name in names:
        lock, folder = parent / name, parent / name[:-len(_LOCK)]
        try:
            handle = open_regular(lock, follow=False)
        except OSError:
            continue
        with handle:
            _remove_if_abandoned(handle, lock, folder, device)


def _remove_if_abandoned(handle: BinaryIO, lock: Path, folder: Path, device: int) -> None:
    """Remove `folder` and its `lock` (open as `handle`) if no build holds the lock."""
    try:
        if os.fstat(handle.fileno()).st_size or not _lock(handle.fileno(), wait=False):
            return  # not a lock building_folder made, or a build in progress
        try:
            found = os.lstat(folder)
        except FileNotFoundError:  # killed before its folder was made, or after removing it
            os.unlink(lock)
            return
        if not stat.S_ISDIR(found.st_mode) or found.st_dev != device:  # a link, a mount
            return
        shutil.rmtree(folder)
        os.unlink(lock)
    except OSError:
        return


try:
    import fcntl as _fcntl
except ImportError:  # Windows
    _fcntl = None  # type: ignore[assignment]


def _lock(fd: int, *, wait: bool) -> bool:
    """Take fd's exclusive lock (wait: until it is free); False if another process holds it
    or the file system cannot lock it."""
    if _fcntl is None:
        return False
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX | (0 if wait else _fcntl.LOCK_NB))
    except OSError:  # held (BlockingIOError), or no locks there (ENOLCK, EOPNOTSUPP)
        return False
    return True


def write_atomic(path: Union[str, os.PathLike], data: Data, *, encoding: str = "utf-8") -> Path:
    """Replace `path` with `data` (text or bytes) in one rename; see the module docstring."""
    path = Path(path)
    with atomic_path(path) as tmp:
        _fill(tmp, data, encoding)
    return path


def create_new(path: Union[str, os.PathLike], data: Data, *, encoding: str = "utf-8") -> Path:
    """Create `path` with `data`, whole, only if nothing is there: FileExistsError otherwise.

    The content is written to a temporary file first and then hard-linked under its name, which
    fails if the name exists, so that of two processes creating the same path at once exactly
    one succeeds, and a kill never leaves the file half-written. Where the file system has no
    hard links, an exclusive create (O_EXCL) claims the name and is then filled."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{short_name(path.name)}.",
                               suffix=".tmp")
    try:
        try:
            _set_default_mode(fd, tmp)
        finally:
            os.close(fd)
        _fill(Path(tmp), data, encoding)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError:  # no hard links here
            with open(path, "xb") as out:
                out.write(Path(tmp).read_bytes())
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return path


def _fill(tmp: Path, data: Data, encoding: str) -> None:
    if isinstance(data, str):
        # A path that is not valid UTF-8 (surrogate escapes) is written escaped.
        tmp.write_text(data, encoding=encoding, errors="backslashreplace")
    else:
        tmp.write_bytes(data)


def resolved(path: Union[str, os.PathLike]) -> Path:
    """`path` made absolute with every symlink followed; one that loops is the user's to fix, said
    in one line (TracelabError), not a traceback."""
    from tracelab.core.errors import TracelabError
    try:
        return Path(path).resolve()
    except RuntimeError as exc:  # Python < 3.13's "Symlink loop"
        loop = exc
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise TracelabError(f"{path}: cannot be followed "
                                f"({(exc.strerror or str(exc)).lower()})") from exc
        loop = exc
    raise TracelabError(f"{path}: a symbolic link loop (it leads back to itself); expected a "
                        "path that ends in a file or folder") from loop


def open_regular(path: Union[str, os.PathLike], *, follow: bool = True) -> BinaryIO:
    """`path` opened for reading, if it is a regular file: a FIFO would block the reader until
    something writes to it, and a device may never end. follow=False: nor a link to one.
    OSError otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_inside(path: Union[str, os.PathLike], folder: Union[str, os.PathLike], *,
                limit: Optional[int] = None) -> BinaryIO:
    """`path` opened for reading if it is a regular file whose real path lies inside `folder`'s:
    a log's link to /proc/self/environ or /etc/passwd is not the log's to read, a FIFO would
    block and a device never ends. `limit`: a file larger than that many bytes is refused too.
    OSError saying why otherwise (its strerror words the reason for a problem line)."""
    real, root = os.path.realpath(path), os.path.realpath(folder)
    try:
        inside = os.path.commonpath([real, root]) == root
    except ValueError:  # another drive
        inside = False
    if not inside:
        raise OSError(errno.EACCES, "a link to a file outside its folder", str(path))
    handle = open_regular(real, follow=False)
    if limit is not None and os.fstat(handle.fileno()).st_size > limit:
        handle.close()
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", str(path))
    return handle


def read_inside(path: Union[str, os.PathLike], folder: Union[str, os.PathLike], *,
                limit: Optional[int] = None) -> bytes:
    """The bytes of `path`, opened by `open_inside`; never more than `limit` (a file that grows
    while it is read is refused when it passes it)."""
    with open_inside(path, folder, limit=limit) as handle:
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", str(path))
    return data


_SEPARATORS = re.compile(r'[/\\:*?"<>|\t\n\r]')  # and what Windows refuses in a name


def safe_file_name(name: str) -> str:
    """`name` as a file name that shows what it is: separators, control and invisible
    formatting characters (`printable.INVISIBLE`) each replaced by `_`, no leading dot (a
    hidden file), at most _NAME_BYTES bytes; `run` when nothing is left."""
    return short_name(_SEPARATORS.sub("_", INVISIBLE.sub("_", name)).lstrip(".")) or "run"
