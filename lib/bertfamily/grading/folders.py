"""A folder per student (``alice/exercise.ipynb``, a hub's homes, a shared drive, an e-mail export): whose each
folder is, and one student a folder.

The folder is the student (:func:`folder_student`): a folder named as a roster id, holding one roster id as a word
(``jupyter-20002/``), named as exactly one roster student (``Bob Good/``), as one student's e-mail address or login
in the roster (a column such as ``email``, ``sis_login_id``, ``login`` or ``username``), or as an address whose
local part is one student's name (``bob.good@uni.example/``). Only a folder that is none of these leaves its files
to their names (:func:`~bertfamily.grading.gradebook.attribution`), which the student chose; and then a folder is
still one student's (:func:`one_student_a_folder`): a folder whose files name two students, or a file named for a
student whose files are in another folder, counts for nobody until the lecturer has read it (red team round 15:
Mallory's ``20002_exercise.ipynb`` in her own e-mail-named folder replaced Bob's grade in Canvas's import).
"""

from __future__ import annotations

import re

#: Roster columns that name a student's account (Canvas's export, Moodle's worksheet, a lecturer's own list).
ACCOUNT_COLUMNS = ("email", "e-mail", "email address", "sis_login_id", "sis login id", "login", "username", "user")


def _words(text: str) -> list[str]:
    return [w.casefold() for w in re.split(r"[\W_]+", text) if w]


def folder_student(key: str, roster: dict) -> str:
    """The roster id of the student whose folder is named ``key`` (see the module's rules), or ""."""
    if key in roster:
        return key
    words = set(_words(key)) | {key.casefold()}
    rules = [
        [sid for sid in roster if sid.casefold() in words],
        [
            sid
            for sid, s in roster.items()
            if " ".join(s.get("name", "").split()).casefold() == " ".join(key.split()).casefold()
        ],
        [
            sid
            for sid, s in roster.items()
            if any(s.get(c, "").casefold() == key.casefold() for c in ACCOUNT_COLUMNS if s.get(c))
        ],
    ]
    local = key.split("@", 1)[0] if "@" in key else ""
    if local and len(_words(local)) > 1:  # first.last@...: the name's words, in any order
        rules.append([sid for sid, s in roster.items() if sorted(_words(s.get("name", ""))) == sorted(_words(local))])
    for found in rules:
        if len(found) == 1:
            return found[0]
    return ""


def one_student_a_folder(owners: dict, folder_of: dict, unnamed: set) -> dict:
    """``owners`` (a file's display -> (roster id, problem)) where the files of the folders in ``unnamed`` (no
    roster student's by name, :func:`folder_student`) count for nobody if their folder's files name two students,
    or a student they name has files in another folder too (``folder_of``: display -> folder, for every file of
    a folder per student); each such problem says why, for the lecturer to read."""
    by_folder: dict[str, set] = {}
    where: dict[str, set] = {}
    for display, key in folder_of.items():
        if owners[display][0]:
            by_folder.setdefault(key, set()).add(owners[display][0])
            where.setdefault(owners[display][0], set()).add(key)
    out = dict(owners)
    for display, key in folder_of.items():
        sid = owners[display][0]
        if key not in unnamed or not sid:
            continue
        others, elsewhere = sorted(by_folder[key] - {sid}), sorted(where[sid] - {key})
        if others or elsewhere:
            why = (
                f"the folder also holds files named for {', '.join(others)}"
                if others
                else f"{sid}'s files are also in {', '.join(repr(e) for e in elsewhere)}"
            )
            out[display] = (
                "",
                f"read by hand: named for {sid} in the folder {key!r}, which is no roster student's by its name, and "
                f"{why}: a folder is one student's, so this file counts for nobody until you check it",
            )
    return out
