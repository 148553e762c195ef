"""The journal of a class graded on a cluster: every finished row on disk as it comes, for ``--resume``."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

from bertfamily.grading.exercise import Exercise
from bertfamily.grading.fingerprints import bytes_digest, short_digest
from bertfamily.grading.monitor import Limits
from bertfamily.grading.pipeline import Row

JOURNAL_SUFFIX = ".journal"
_JOURNAL_FORMAT = "bertfamily-grade journal 1"


class Interrupted(ValueError):
    """The run stopped before every submission was graded; the journal keeps what was."""


def journal_path(out) -> Path:
    """The journal of a run that writes the gradebook ``out``: ``out`` + ``.journal``, beside it."""
    out = Path(out)
    return out.with_name(out.name + JOURNAL_SUFFIX)


class Journal:
    """One JSON line per finished row, keyed by the submission's name and the SHA-256 of its bytes,
    after a first line with the settings that decide the rows. Each line is flushed to disk as it
    is written, so an interrupted run keeps every row it finished."""

    def __init__(self, path: Path, settings: dict, rows: dict, handle):
        self.path, self.settings, self.rows, self._handle = path, settings, rows, handle

    @classmethod
    def open(cls, path, settings: dict, resume: bool, force: bool) -> Journal:
        """With ``resume``, keep the rows of an existing journal written with the same settings;
        without it, an existing journal that holds rows is replaced only with ``force``."""
        path = Path(path)
        rows = {}
        if path.exists():
            # "\n" alone ends a line: str.splitlines also splits at U+2028, U+0085, ... that a row's text may hold
            lines = path.read_text(encoding="utf-8").split("\n")
            if resume:
                rows = cls._read(path, lines, settings)
            elif len(lines) > 1 and not force:
                raise ValueError(
                    f"{path} holds rows of an earlier run that did not finish: pass --resume to keep "
                    "them (and grade only the rest), or --force to start over"
                )
        elif not path.parent.is_dir():
            raise ValueError(f"no folder {path.parent} for the journal {path.name}")
        # written afresh (the kept rows first): a line cut short by a crash is not continued
        handle = tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", delete=False
        )
        journal = cls(path, settings, {}, handle)
        journal._write({"journal": _JOURNAL_FORMAT, "settings": settings})
        for (_, digest), row in rows.items():
            journal.add(digest, row)
        os.replace(handle.name, path)
        return journal

    @staticmethod
    def _read(path, lines, settings) -> dict:
        try:
            head = json.loads(lines[0]) if lines else {}
        except (json.JSONDecodeError, RecursionError):
            head = {}
        if (
            not isinstance(head, dict)
            or head.get("journal") != _JOURNAL_FORMAT
            or not isinstance(head.get("settings"), dict)
        ):
            raise ValueError(f"{path} is not a journal of bertfamily-grade: move it away, or grade without --resume")
        if head["settings"] != settings:
            differ = [k for k in settings if k != "course" and head["settings"].get(k) != settings[k]]
            parts = [f"{', '.join(differ)} differ"] if differ else []
            then = head["settings"].get("course")
            then = then if isinstance(then, dict) else {}
            changed = [
                f"{key} {short_digest(str(then.get(key)))} then, {short_digest(str(now))} now"
                for key, now in settings["course"].items()
                if then.get(key) != now
            ]
            if changed:
                parts.append("the course changed since: " + ", ".join(changed))
            raise ValueError(
                f"{path} was written with other settings ({'; '.join(parts)}): grade with the same "
                "options and course to resume or regrade, or pass --force without --resume or --regrade to grade "
                "every submission again with these"
            )
        rows = {}
        for line in lines[1:]:
            try:
                entry = json.loads(line)
                rows[(entry["submission"], entry["sha256"])] = Row(**entry["row"])
            except (ValueError, RecursionError, TypeError, KeyError):
                continue  # a line cut short by a crash, or not a row: that submission is graded again
        return rows

    def _write(self, entry: dict) -> None:
        self._handle.write(json.dumps(entry) + "\n")  # ASCII: no character of a row's text can end its line
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def add(self, digest: str, row: Row) -> None:
        self.rows[(row.submission, digest)] = row
        self._write({"submission": row.submission, "sha256": digest, "row": dataclasses.asdict(row)})

    def close(self) -> None:
        self._handle.close()


def run_settings(exercise: Exercise, limits: Limits, sanitize: str, strict_outputs: bool, course: dict) -> dict:
    """What decides a row besides the submission: a journal's rows are reused only under the same."""
    reference = json.dumps(exercise.reference, sort_keys=True, ensure_ascii=False).encode()
    return {
        "exercise": f"{exercise.name} {bytes_digest(reference)}",
        "limits": dataclasses.asdict(limits),
        "sanitize": bytes_digest(sanitize.encode()),
        "strict_outputs": strict_outputs,
        "course": course,
    }
