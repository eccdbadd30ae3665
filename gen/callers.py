"""Who asked for the work under way, the command line or a Python program, and so which name an error gives a
setting: the command line's option (`--ray-address`) to someone at a shell, the options field
(`RunOptions.ray_address`) or the function's parameter to a program, which never typed the option.

:func:`named` is the one place that chooses between the two names; every message reached from gen's API that
names a setting goes through it. The command line says it is the caller (:func:`command_line`) while its command
runs, as it turns the progress displays on, and says so no more when it ends, so a program that runs a command
in-process and then calls the API gets the API's names again. The switch is per process, like the progress
switch: one command at a time.
"""

from __future__ import annotations

_asked_by_command_line = False


def command_line(on: bool = True) -> None:
    """The command line is (or is no more) the caller: from now on errors name its options."""
    global _asked_by_command_line
    _asked_by_command_line = on


def by_command_line() -> bool:
    return _asked_by_command_line


def named(option: str, field: str) -> str:
    """`option` (as typed at a shell: "--ray-address", "DATASET") when the command line asked, else `field` (as a
    program wrote it: "RunOptions.ray_address", "evaluate(dataset=...)")."""
    return option if _asked_by_command_line else field
