"""The file trees a run leaves: measured and deleted iteratively, whatever their shape.

A kernel can make a folder tree deeper than Python's recursion (``os.walk`` and ``shutil.rmtree`` are
recursive in Python 3.11), longer than ``PATH_MAX``, wider than memory, or without permissions.
Both functions here walk with one open folder at a time (by file descriptor, relative to its
parent, never by a full path), so no shape crashes them:

* :func:`measure` counts a tree's bytes, files and depth, and stops at a bound (:class:`TooLarge`):
  the watcher stops a run whose tree passes it;
* :func:`remove_tree` deletes any tree, to the last entry, and never raises: a folder it cannot
  delete is left, said in its return value, and touches no other run.
"""

from __future__ import annotations

import os
import stat

#: Bounds of a tree a run may leave in a folder the grader measures (its entries and depth).
MAX_ENTRIES = 100_000
MAX_DEPTH = 200
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class TooLarge(Exception):
    """A tree with more entries, or deeper, than the bounds allow."""


def _open_dir(name, dir_fd=None) -> int:
    """A folder's descriptor; a folder without permissions is given them first (the run's own files)."""
    try:
        return os.open(name, _DIR, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(name, stat.S_IRWXU, dir_fd=dir_fd)  # a folder (checked by the caller), not a link
        return os.open(name, _DIR, dir_fd=dir_fd)


def measure(
    root,
    max_entries: int = MAX_ENTRIES,
    max_depth: int = MAX_DEPTH,
    sizes: set | None = None,
    one_filesystem: bool = False,
    prune: bool = False,
    formats: dict | None = None,
) -> int:
    """Bytes the files under ``root`` take on disk; :class:`TooLarge` past ``max_entries`` entries or
    ``max_depth`` levels. With ``sizes``, the size of every regular file is added to it; with
    ``one_filesystem``, what is mounted below ``root`` is left out. A folder that disappears while it
    is walked counts as empty. With ``prune``, folders deeper than ``max_depth`` are left out instead.
    With ``sizes``, only files whose bytes were written count (:func:`written`); with ``formats`` too, each
    size of :data:`FORMAT_BYTES` or more maps to whether some file of that size is a saved model (:func:`saved`)."""
    try:
        top = _open_dir(root)
        device = os.fstat(top).st_dev
    except OSError:
        return 0
    total, entries, stack = 0, 0, [(top, os.scandir(top))]
    try:
        while stack:
            fd, listing = stack[-1]
            entry = next(listing, None)
            if entry is None:
                listing.close()
                os.close(fd)
                stack.pop()
                continue
            entries += 1
            if entries > max_entries:
                raise TooLarge(f"more than {max_entries:,} files and folders")
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if one_filesystem and info.st_dev != device:
                continue
            total += info.st_blocks * 512
            if (
                stat.S_ISREG(info.st_mode)
                and sizes is not None
                and len(sizes) < max_entries
                and written(entry.name, info, fd)
            ):
                sizes.add(info.st_size)
                if formats is not None and info.st_size >= FORMAT_BYTES:
                    formats[info.st_size] = formats.get(info.st_size, False) or saved(entry.name, fd)
            if stat.S_ISDIR(info.st_mode):
                if len(stack) >= max_depth and prune:
                    continue  # only the top levels were asked for
                if len(stack) >= max_depth:
                    raise TooLarge(f"folders nested more than {max_depth} deep")
                try:
                    child = _open_dir(entry.name, dir_fd=fd)
                except OSError:
                    continue
                stack.append((child, os.scandir(child)))
    finally:
        for fd, listing in stack:
            listing.close()
            os.close(fd)
    return total


#: Files this large or larger are asked whether they are a saved model (:func:`saved`).
FORMAT_BYTES = 2**20
#: How ``torch.save`` began a file before its zip format (the pickled magic number it checks on load).
_TORCH_PICKLE = b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19."


#: A saved model holds many tensors (DistilBERT: about a hundred, in fp32 or int8): a file of fewer is not one.
MIN_TENSORS = 16
#: The most bytes of a saved model's pickle the check reads (DistilBERT's state dict: tens of kilobytes).
MAX_PICKLE = 16 * 2**20


def saved(name, dir_fd=None) -> bool:
    """True where the file is laid out as a saved model of :data:`MIN_TENSORS` tensors or more:
    ``torch.save``'s zip (a central directory that names a ``data.pkl`` and whose entries hold nearly all of
    its bytes; a pickle that refers to that many storages, and that many storage entries), its older
    format (its magic number first, then pickles that refer to that many storages) or safetensors (a JSON
    header of that many tensors, which end where the file does). Headers, directories and the pickles'
    opcodes are read, nothing is unpickled. Random bytes of a size a model would have, with or without a
    header or an archive around them, are none."""
    import io
    import json
    import zipfile

    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), dir_fd=dir_fd)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        try:
            head, size = handle.read(16), os.fstat(fd).st_size
            if head.startswith(_TORCH_PICKLE):  # magic number, protocol, system, then the objects
                handle.seek(0)
                stream = io.BytesIO(handle.read(MAX_PICKLE))
                for _ in range(3):  # its magic number, protocol and system's pickles
                    _storages(stream)
                return _storages(stream) >= MIN_TENSORS
            if head.startswith(b"PK\x03\x04"):
                archive = zipfile.ZipFile(handle)
                entries = archive.infolist()[:100_000]
                pickles = [e for e in entries if e.filename.endswith("/data.pkl") or e.filename == "data.pkl"]
                storages = [e for e in entries if "/data/" in e.filename or e.filename.startswith("data/")]
                if (
                    len(pickles) != 1
                    or pickles[0].compress_type != zipfile.ZIP_STORED  # torch.save stores, never compresses
                    or pickles[0].file_size > MAX_PICKLE
                    or len(storages) < MIN_TENSORS
                    or sum(e.file_size for e in entries) < 0.9 * size
                ):
                    return False
                return _storages(io.BytesIO(archive.read(pickles[0]))) >= MIN_TENSORS
            header = int.from_bytes(head[:8], "little")
            if head[8:9] != b"{" or header > min(size - 8, 2**26):
                return False
            handle.seek(8)
            tensors = json.loads(handle.read(header))
            ends = [v["data_offsets"][1] for k, v in tensors.items() if k != "__metadata__"]
            return len(ends) >= MIN_TENSORS and 8 + header + max(ends) == size
        except (OSError, ValueError, OverflowError, LookupError, TypeError, AttributeError, zipfile.BadZipFile):
            return False


def _storages(stream) -> int:
    """The storages one pickle of ``stream`` refers to (its persistent ids, as ``torch.save`` writes one a
    tensor), read opcode by opcode to its end, never executed; a stream that is no pickle raises ValueError."""
    import pickletools

    found = 0
    for opcode, _, _ in pickletools.genops(stream):
        found += opcode.name in ("BINPERSID", "PERSID")
    return found


#: A file's size counts as measured only when its bytes were written: most of its length is on disk
#: (not a sparse file made by ``truncate``) and its content is not all zeros where the grader looks.
WRITTEN_SHARE, SAMPLES, SAMPLE_BYTES = 0.9, 16, 4096


def written(name, info, dir_fd=None) -> bool:
    """True for a regular file whose bytes were written (see :data:`WRITTEN_SHARE`): a size the run
    made by writing a file, not one typed into ``truncate`` or a file of zeros."""
    if info.st_size <= SAMPLE_BYTES:
        return True  # small files: their size says nothing a check reads
    if info.st_blocks * 512 < WRITTEN_SHARE * info.st_size:
        return False
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        step = max(1, (info.st_size - SAMPLE_BYTES) // (SAMPLES - 1))
        return any(
            os.pread(fd, SAMPLE_BYTES, min(i * step, info.st_size - SAMPLE_BYTES)).strip(b"\0") for i in range(SAMPLES)
        )
    except OSError:
        return False
    finally:
        os.close(fd)


def _empty(fd) -> str | None:
    """Delete every entry of the open folder ``fd`` except folders; the name of a folder in it, or None."""
    with os.scandir(fd) as listing:
        for entry in listing:
            try:
                if entry.is_dir(follow_symlinks=False):
                    return entry.name
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except PermissionError:  # a folder the run made read-only
                    os.fchmod(fd, stat.S_IRWXU)
                    os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                pass
    return None


def remove_tree(path) -> str:
    """Delete ``path`` and everything under it, whatever its depth, width or permissions; never raises.
    Returns "" when it is gone, else why not (the caller leaves it: it holds no other run's files)."""
    path = os.fspath(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return str(exc)
    try:
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(path)
            return ""
        parent = os.open(os.path.dirname(os.path.abspath(path)) or "/", _DIR & ~os.O_NOFOLLOW)
    except OSError as exc:
        return str(exc)
    names, current = [os.path.basename(os.path.abspath(path))], None
    try:
        current = _open_dir(names[0], dir_fd=parent)
        while True:
            child = _empty(current)
            if child is not None:  # one level down: the only folder kept open is the current one
                below = _open_dir(child, dir_fd=current)
                os.close(current)
                current = below
                names.append(child)
                continue
            if len(names) == 1:
                os.close(current)
                current = None
                os.rmdir(names[0], dir_fd=parent)
                return ""
            above = os.open("..", _DIR & ~os.O_NOFOLLOW, dir_fd=current)
            os.close(current)
            current = above
            try:
                os.rmdir(names[-1], dir_fd=current)
            except PermissionError:
                os.fchmod(current, stat.S_IRWXU)
                os.rmdir(names[-1], dir_fd=current)
            names.pop()
    except OSError as exc:
        return f"{exc.strerror or exc} ({'/'.join(names)[-200:]})"
    finally:
        if current is not None:
            os.close(current)
        os.close(parent)
