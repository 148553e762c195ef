"""A folder per student (``alice/exercise.ipynb``, a hub's homes, a shared drive, an e-mail export): whose each
folder is, and one student a folder.

The folder is the student (:func:`folder_match`): exactly, a folder named as a roster id, as one student's e-mail
address or login in the roster (a column such as ``email``, ``sis_login_id``, ``login`` or ``username``), or as one
roster student's name (``Bob Good/``); less surely, a folder holding one roster id as a word (``jupyter-20002/``) or
an address whose local part is one student's name (``bob.good@uni.example/``), names a student may choose. A folder
that is none of these leaves its files to their names (:func:`~bertfamily.grading.gradebook.attribution`), which
the student chose. Either way a folder is one student's (:func:`one_student_a_folder`): a file of a folder that is
not exactly its student's counts for nobody, flagged for the lecturer, where that student has files in a folder as
surely theirs or more, or where its folder is no one's and names two students (red team round 15 and its
re-check: Mallory's ``20002_exercise.ipynb`` in her e-mail-named folder, then her folder ``mallory.20002@...``,
replaced Bob's grade in Canvas's import).
"""

from __future__ import annotations

import re

#: Roster columns that name a student's account (Canvas's export, Moodle's worksheet, a lecturer's own list).
ACCOUNT_COLUMNS = ("email", "e-mail", "email address", "sis_login_id", "sis login id", "login", "username", "user")


def _words(text: str) -> list[str]:
    return [w.casefold() for w in re.split(r"[\W_]+", text) if w]


def folder_match(key: str, roster: dict) -> tuple[str, bool]:
    """(the roster id of the student whose folder is named ``key``, or ""; whether the name is exactly theirs: the
    id, an account of theirs in the roster, their name). The exact rules are asked first; a name that only holds an
    id as a word, or an address that spells a name, is weaker (a student may choose such a name: ``mallory.20002@``),
    and :func:`one_student_a_folder` does not let it take a student who has a folder elsewhere."""
    if key in roster:
        return key, True
    plain = " ".join(key.split()).casefold()
    exact = [
        [
            sid
            for sid, s in roster.items()
            if any(s.get(c, "").casefold() == key.casefold() for c in ACCOUNT_COLUMNS if s.get(c))
        ],
        [sid for sid, s in roster.items() if " ".join(s.get("name", "").split()).casefold() == plain],
    ]
    words = set(_words(key)) | {key.casefold()}
    weak = [[sid for sid in roster if sid.casefold() in words]]
    local = key.split("@", 1)[0] if "@" in key else ""
    if local and len(_words(local)) > 1:  # first.last@...: the name's words, in any order
        weak.append([sid for sid, s in roster.items() if sorted(_words(s.get("name", ""))) == sorted(_words(local))])
    for found, strong in [*((f, True) for f in exact), *((f, False) for f in weak)]:
        if len(found) == 1:
            return found[0], strong
    return "", False


def folder_student(key: str, roster: dict) -> str:
    """The roster id of the student whose folder is named ``key`` (:func:`folder_match`), or ""."""
    return folder_match(key, roster)[0]


def one_student_a_folder(owners: dict, folder_of: dict, rank: dict) -> dict:
    """``owners`` (a file's display -> (roster id, problem)) where a file counts for nobody, flagged for the lecturer,
    if its folder is not exactly its student's name (``rank``: folder -> 2 exactly a student's, 1 an id as a word or
    an address that spells a name, 0 no student's: its files go by their own names, :func:`folder_match`) and its
    student has files in another folder of as high a rank or higher, or its folder is no student's and its files
    name two students (``folder_of``: display -> folder, for every file of a folder per student)."""
    by_folder: dict[str, set] = {}
    where: dict[str, set] = {}
    for display, key in folder_of.items():
        if owners[display][0]:
            by_folder.setdefault(key, set()).add(owners[display][0])
            where.setdefault(owners[display][0], set()).add(key)
    out = dict(owners)
    for display, key in folder_of.items():
        sid = owners[display][0]
        if not sid or rank[key] == 2:
            continue
        others = sorted(by_folder[key] - {sid}) if rank[key] == 0 else []
        elsewhere = sorted(k for k in where[sid] - {key} if rank[k] >= rank[key])
        if others or elsewhere:
            why = (
                f"the folder also holds files named for {', '.join(others)}"
                if others
                else f"{sid}'s files are also in {', '.join(repr(e) for e in elsewhere)}"
            )
            out[display] = (
                "",
                f"read by hand: {sid}'s by its name, in the folder {key!r}, not exactly a roster student's name, and "
                f"{why}: a folder is one student's, so this file counts for nobody until you check it",
            )
    return out
