"""Blackboard Learn's "Download assignment" (lecturer round 11: every file was read as a student named by the
assignment's first word, and with ``--pattern`` each file was late by the time it was copied): each attempt's file is
``ASSIGNMENT_USERNAME_attempt_YYYY-MM-DD-HH-MM-SS_FILENAME``, beside a receipt
``ASSIGNMENT_USERNAME_attempt_YYYY-MM-DD-HH-MM-SS.txt``. The student is the user name (a roster id, or the roster's
login or e-mail column); the time handed in is the one in the name, in Blackboard's own zone, which the name does not
say: read in the deadline's zone, as Moodle's worksheet times are.
"""

from __future__ import annotations

import re
from datetime import datetime

BLACKBOARD_FILE = re.compile(
    r"^(?P<assignment>.*)_(?P<user>[^_]+)_attempt_(?P<when>\d{4}(?:-\d\d){5})(?:_(?P<file>.+)|\.txt)$", re.S
)
BLACKBOARD_TIME = "the attempt's time in Blackboard's file name"


def attempt_moment(name: str) -> datetime | None:
    """The time of the attempt whose file is ``name``, as the name says it (no zone), or None for a name that is
    not Blackboard's."""
    m = BLACKBOARD_FILE.match(name)
    return datetime.strptime(m["when"], "%Y-%m-%d-%H-%M-%S") if m else None
