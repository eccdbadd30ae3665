"""The `gen` program (the console script and `python -m gen`). It takes the stop signals before anything else is
imported: loading the command line takes a good part of a second, and a stop that came meanwhile would end the
process with no word. Until the command line's own handlers are in place (gen/stopping.py), a stop says that
nothing was written (nothing was) and exits with 128 + the signal's number."""

import os
import signal

NAMES: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


def stopped_early(signum: int, _frame: object) -> None:
    said = "interrupted" if signum == signal.SIGINT else f"interrupted ({NAMES[signum]})"
    os.write(2, f"{said}; nothing was written\n".encode())
    os._exit(128 + signum)  # mid-import: no cleanup to run, and nothing to unwind into


def main() -> None:
    for signum in NAMES:
        signal.signal(signum, stopped_early)
    from gen.cli import entry

    entry()


if __name__ == "__main__":
    main()
