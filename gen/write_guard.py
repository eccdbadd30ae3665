"""gen never writes inside what it reads.

Every command that writes (`gen run`, `push --export-dir`, `export`, `eval --json/--csv`, `baseline`,
`import-predictions`, `judge`) and the Python functions behind them hand their output paths and their input
paths to `refuse_writing_into` before they write anything. One function, so that the rule and its message are
the same everywhere: an output that is an input, or lies inside an input folder, is refused; so is an input
that lies inside an output the command replaces whole (a run folder, an export folder, a file), and two outputs
that would land on each other.

Paths are compared as the file system sees them: symbolic links and `..` are resolved first, and two paths that
both exist are the same when `os.path.samefile` says so (a hard link, a bind mount, a case-insensitive disk).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from itertools import combinations
from pathlib import Path

from gen.errors import GenError

Named = Mapping[str, "str | os.PathLike[str] | None"]
MARKER = ".gen-files.json"  # what marks a folder gen wrote (gen/folders.py): a run folder, an export


def refuse_writing_into(outputs: Named, inputs: Named, adds_to: Collection[str] = ()) -> None:
    """Raise one GenError, before anything is written, when an output would overwrite an input.

    `outputs` and `inputs` map what the user calls each path (an option such as `--json`, an argument such as
    `DATASET`, a recipe field such as `sources[0].path`) to the path; None means not given. An output is
    replaced whole unless its name is in `adds_to`: a folder gen only adds files to (`--batch-export`), which
    may hold inputs. Nor may an output lie inside a folder gen published (its marker file says so): such a
    folder is sealed with the list of its files, and is only ever replaced whole."""
    written = {name: Path(path) for name, path in outputs.items() if path is not None}
    read = {name: Path(path) for name, path in inputs.items() if path is not None}
    for option, output in written.items():
        holding = [(what, source) for what, source in read.items() if lies_within(output, source)]
        if holding:  # the input nearest to the output is the one to name: a file inside the dataset, say
            what, source = max(holding, key=lambda item: len(real(item[1]).parts))
            relation = "is" if same_path(output, source) else "lies inside"
            raise refusal(option, output, f"this {relation} the input {what} ({source}), which the command reads")
        for what, source in read.items():
            if option not in adds_to and lies_within(source, output):
                why = f"the input {what} ({source}) lies inside it, and the command replaces it whole"
                raise refusal(option, output, why)
    for option, output in written.items():
        published = next((folder for folder in real(output).parents if (folder / MARKER).is_file()), None)
        if published is not None:
            why = f"this lies inside {published}, a run or export gen published and only ever replaces whole"
            raise refusal(option, output, why)
    for (first, one), (second, other) in combinations(written.items(), 2):
        if (lies_within(one, other) and second not in adds_to) or (lies_within(other, one) and first not in adds_to):
            raise refusal(second, other, f"{first} ({one}) overlaps it, so one would overwrite the other")


def refusal(option: str, output: Path, why: str) -> GenError:
    return GenError(
        f"{why}; gen never writes over or inside what it reads, so nothing was written",
        file=output,
        field=option,
        expected=f"a path for {option} outside every input of the command",
    )


def real(path: Path) -> Path:
    """`path` with every symbolic link and `..` resolved, as far as it exists."""
    return Path(os.path.realpath(os.path.abspath(path)))


def same_path(one: Path, other: Path) -> bool:
    one, other = real(one), real(other)
    if one == other:
        return True
    try:
        return os.path.samefile(one, other)
    except OSError:  # one of them does not exist (yet): the resolved paths decide
        return False


def lies_within(inner: Path, outer: Path) -> bool:
    """`inner` is `outer` or lies somewhere inside it."""
    inner = real(inner)
    return any(same_path(step, outer) for step in (inner, *inner.parents))
