"""The grader's own reads and writes of files a student may have shaped: never following a link,
never blocking, never reading more than a cap, never writing outside the folders the instructor gave.

* :func:`read_regular`: a submission's bytes, opened without following a link and without blocking
  (a FIFO named ``aaron.ipynb``), checked to be a regular file and no larger than the cap *before* it
  is read (a 1 TiB sparse file is refused by its size), then read to the cap at most.
* :func:`regular_digest`: the SHA-256 of a submission read the same way (None where it is not a
  regular file under the cap), so that the journal's key never blocks on a FIFO, never follows a link
  to ``/dev/zero`` and never hashes a sparse terabyte.
* :func:`check_output_folder`: the instructor's output paths (``--out``, ``--feedback``...) go through
  no symbolic link and lie outside every folder of submissions (a link a student planted there would take the
  grader's writes elsewhere).
* :func:`from_zip`: the one notebook of a zipped submission, read to the cap, never extracted.
* :func:`write_in`: a file written into a folder opened without following links, through a new
  temporary file renamed over the name (a link planted under that name is replaced, never followed).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
    stat.S_IFLNK: "a symbolic link",
}
_NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def read_regular(path, cap: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``cap`` of them; :class:`ValueError` saying
    why not (not a regular file, a link, larger than ``cap``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: the last part of the path is a link
            raise ValueError("a symbolic link: hand in the notebook itself") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise ValueError(f"{kind}, not a file: only notebook files are graded")
        if info.st_size > cap:
            raise ValueError(f"larger than {cap // 2**20} MiB ({info.st_size:,} bytes): not a notebook")
        chunks, left = [], cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 2**20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > cap:  # it grew while read
            raise ValueError(f"larger than {cap // 2**20} MiB: not a notebook")
        return data
    finally:
        os.close(fd)


def regular_digest(path, cap: int) -> str | None:
    """The SHA-256 of the regular file at ``path`` read as :func:`read_regular` reads it; None where
    :func:`read_regular` refuses it (a link, a FIFO, a device, larger than ``cap``) or it cannot be
    read: its row is then the grader's own, made without a run, and says why."""
    import hashlib

    try:
        return hashlib.sha256(read_regular(path, cap)).hexdigest()
    except (OSError, ValueError):
        return None


def links_in(path) -> list[str]:
    """The parts of ``path`` (made absolute, not resolved) that are symbolic links, from the root."""
    path = Path(os.path.abspath(path))
    return [str(p) for p in [*reversed(path.parents), path] if p.is_symlink()]


def check_output_folder(folder, submissions, label: str) -> None:
    """:class:`ValueError` when ``folder`` (where the grader writes ``label``) goes through a symbolic
    link, or lies in a folder of ``submissions`` given to grade (files given one by one make no folder
    a class's)."""
    linked = links_in(folder)
    if linked:
        raise ValueError(f"{label} {folder} goes through a symbolic link ({linked[0]}): give its real path")
    real = Path(os.path.realpath(folder))
    for given in submissions:
        tree = Path(os.path.realpath(given))
        if tree.is_dir() and real.is_relative_to(tree):
            raise ValueError(
                f"{label} {folder} is inside a folder of submissions ({tree}): choose a folder "
                "outside every folder of submissions"
            )


def open_folder(folder) -> int:
    """A descriptor of ``folder`` (made if missing), opened without following a link at any part."""
    folder = Path(os.path.abspath(folder))
    linked = links_in(folder)
    if linked:
        raise ValueError(f"{folder} goes through a symbolic link ({linked[0]}): give its real path")
    folder.mkdir(parents=True, exist_ok=True)
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)


def write_in(folder_fd: int, name: str, data: bytes) -> None:
    """Write ``data`` as ``name`` in the folder ``folder_fd``: a new temporary file there (``O_EXCL``),
    then renamed over ``name``, so a link under that name is replaced and never followed."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"not a file name: {name!r}")
    for _ in range(100):
        temporary = f".{tempfile.gettempprefix()}-{os.urandom(6).hex()}.tmp"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=folder_fd)
            break
        except FileExistsError:
            continue
    else:
        raise OSError("no temporary name free")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=folder_fd)
        except OSError:
            pass
        raise


ZIP_MAGIC = b"PK\x03\x04"
MAX_ZIP_ENTRIES = 1000  # a zipped notebook's archive holds a few; a million would cost seconds to list


def from_zip(data: bytes, cap: int) -> tuple[bytes, str]:
    """The one notebook in the .zip ``data`` and its name: read, never extracted (no name inside is a path
    here), no more than ``cap`` bytes however the archive describes it; ValueError saying why where the zip
    holds no notebook, several, one too large or another zip, or cannot be read."""
    import io
    import re
    import zipfile

    if data.count(b"PK\x01\x02") > MAX_ZIP_ENTRIES:  # central directory entries, counted before any is parsed
        raise ValueError(f"a .zip of more than {MAX_ZIP_ENTRIES:,} entries")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = [
                m
                for m in archive.infolist()
                if not m.is_dir()
                and m.filename.lower().endswith(".ipynb")
                and not {"__MACOSX", ".ipynb_checkpoints"} & set(re.split(r"[\\/]", m.filename))
            ]
            if len(members) != 1:
                raise ValueError(f"a .zip holding {len(members)} notebooks")
            if members[0].flag_bits & 0x1:
                raise ValueError("a password-protected .zip")
            with archive.open(members[0]) as handle:
                inner = handle.read(cap + 1)
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged archive raises zlib's, lzma's, struct's... errors: one row's
        raise ValueError(f"a .zip that cannot be read ({type(exc).__name__})") from None
    if len(inner) > cap or inner[:4] == ZIP_MAGIC:
        raise ValueError(f"a .zip whose notebook is larger than {cap // 2**20} MiB or another .zip")
    return inner, members[0].filename


def csv_text(path, what: str) -> str:
    """The text of the CSV file ``path`` (``what`` it is: "the roster"), read as UTF-8 (a byte-order mark or not);
    a ValueError that names the file and says what to do where a spreadsheet saved it in another encoding, or
    separated its columns with ``;`` (as in locales that write decimal commas) or tabs."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{what} {path} is not UTF-8 (byte {exc.start}: {data[exc.start : exc.start + 1]!r}): saved by a "
            "spreadsheet in its own encoding? Save it as 'CSV UTF-8 (Comma delimited)', or use the LMS's own download "
            "as it came"
        ) from None
    first = text.split("\n", 1)[0]
    for mark, why in (
        (";", "a spreadsheet in a locale that writes decimal commas saves CSV so"),
        ("\t", "saved as 'Text (Tab delimited)', or pasted from a spreadsheet"),
    ):
        if mark in first and "," not in first:
            raise ValueError(
                f"{what} {path} separates its columns with {mark!r} ({why}): save it as 'CSV UTF-8 (Comma delimited)', "
                "or use the LMS's own download as it came"
            )
    return text


def replacing_mode(out) -> int:
    """The mode a file written over ``out`` gets (through a temporary file, which is 0600 whatever the umask): the
    one ``out`` has (a lecturer's ``chmod g+r`` kept), else what the umask gives a new file (lecturer round 11)."""
    import stat

    try:
        return stat.S_IMODE(os.stat(out).st_mode)
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask
