"""RunOptions: everything about one run that is not in its recipe, as one frozen object. `gen run` builds it from
its command line and `gen.run(recipe, options)` takes it, so a setting reaches the runner, the executors and the
engine through this one object (its `llm` part is the engine's own RunSettings) instead of a parameter threaded
through each layer. None of it changes the data: it says where the run goes, how much of the corpus it reads, who
does the work and how fast the LLM calls go."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gen.errors import GenError
from gen.llm.config import RunSettings

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class RunOptions:
    """One run's settings beside its recipe. `source_dir` is where inputs the recipe names by file name alone are
    looked for first (used when the recipe is given as a path or a mapping). Checked when made, so a Python
    caller gets the same message as the command line."""

    output_dir: Path | None = None
    limit: int | None = None
    workers: int | None = None
    executor: str = "local"
    ray_address: str | None = None
    source_dir: Path | None = None
    llm: RunSettings = field(default_factory=RunSettings)  # cache, offline, limits, batch files, request processes

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise GenError(f"unknown executor {self.executor!r}", field="--executor", expected=" or ".join(EXECUTORS))
        if self.ray_address is not None and self.executor != "ray":
            raise GenError("--ray-address is only for --executor ray", field="--ray-address", expected="--executor ray")
