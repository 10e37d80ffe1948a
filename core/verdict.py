"""A run's verdict, as Jepsen gives it: valid (True), invalid (False) or unknown (the string
"unknown": the checkers could not decide, or the run tested too little to say), with the
word each is printed as and the exit code each command ends with."""
from __future__ import annotations

UNKNOWN = "unknown"
WORD = {True: "valid", False: "invalid", UNKNOWN: "unknown"}
EXIT = {True: 0, False: 1, UNKNOWN: 2}
EXIT_USAGE = 64  # a bad command line or input file: no verdict (sysexits.h EX_USAGE)


def word(valid) -> str:
    """The verdict's word; anything but True or False reads unknown."""
    return WORD.get(valid if valid in (True, False) else UNKNOWN, "unknown")


def exit_code(valid) -> int:
    """Jepsen's exit code: 0 valid, 1 invalid, 2 unknown (anything but True or False)."""
    return EXIT[valid if valid in (True, False) else UNKNOWN]
