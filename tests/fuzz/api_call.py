"""`python -m tests.fuzz.api_call CALL`: call one function of gen's Python API (gen/api) as a script would, with
the arguments pickled in the file CALL (tests/fuzz/api_calls.py writes it), and end as gen's program ends, so the
fuzz runner (tests/fuzz/runner.py) checks it for the same promises: exit 0 when the call returns; one line
`error: MESSAGE` (or `stopped: ...`) and the error's exit code when it raises GenError, the one error the API
promises; any other exception escapes with its traceback, which the runner counts as a broken promise.

The options objects (gen.RunOptions, gen.EvalOptions...) are made inside the call, from their class name and
keyword arguments: refusing a hostile value when the object is made is as good as refusing it later."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any


class Make:
    """An object of gen's API to be made in the call: `gen.<name>(**kwargs)`, or with `module`, a class there."""

    def __init__(self, name: str, kwargs: dict[str, Any], module: str = "gen") -> None:
        self.name, self.kwargs, self.module = name, kwargs, module

    def made(self) -> Any:
        import importlib

        made_kwargs = {key: made(value) for key, value in self.kwargs.items()}
        return getattr(importlib.import_module(self.module), self.name)(**made_kwargs)

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={value!r}"[:120] for key, value in self.kwargs.items())
        return f"{self.name}({shown})"


def made(value: Any) -> Any:
    return value.made() if isinstance(value, Make) else value


def main(argv: list[str]) -> int:
    import gen
    from gen.errors import GenError, Stopped

    call = pickle.loads(Path(argv[0]).read_bytes())
    try:
        function = getattr(gen, call["function"])
        function(*[made(arg) for arg in call["args"]], **{key: made(value) for key, value in call["kwargs"].items()})
    except GenError as exc:
        print(f"{'stopped' if isinstance(exc, Stopped) else 'error'}: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    from tests.fuzz import api_call  # the module the pickle names, so its Make is the one `made` knows

    sys.exit(api_call.main(sys.argv[1:]))
