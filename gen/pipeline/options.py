"""RunOptions: everything about one run that is not in its recipe, as one frozen object. `gen run` builds it from
its command line and `gen.run(recipe, options)` takes it, so a setting reaches the runner, the executors and the
engine through this one object (its `llm` part is the engine's own RunSettings) instead of a parameter threaded
through each layer. None of it changes the data: it says where the run goes, how much of the corpus it reads, who
does the work and how fast the LLM calls go."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from gen.callers import named
from gen.errors import GenError
from gen.llm.config import RunSettings
from gen.progress import ProgressMode
from gen.validation import OptionsModel


class RunOptions(OptionsModel):
    """One run's settings beside its recipe. `source_dir` is where inputs the recipe names by file name alone are
    looked for first (used when the recipe is given as a path or a mapping). Checked when made (OptionsModel:
    each number in its range, each field of its type, one GenError naming it), so a Python caller gets the same
    refusal as the command line, whose options take their ranges from these fields."""

    model_config = ConfigDict(frozen=True)

    output_dir: Path | None = None
    limit: int | None = Field(default=None, ge=0, le=1_000_000_000)
    workers: int | None = Field(default=None, ge=1, le=256)  # a process each
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    source_dir: Path | None = None
    llm: RunSettings = Field(default_factory=RunSettings)  # cache, offline, limits, batch files, request processes

    @property
    def progress(self) -> ProgressMode:
        """The displays of this run (gen.api's calls read every options object's `progress`): its LLM settings'."""
        return self.llm.progress

    @model_validator(mode="after")
    def ray_address_needs_ray(self) -> RunOptions:
        if self.ray_address is not None and self.executor != "ray":
            address, ray = named("--ray-address", "RunOptions.ray_address"), named("--executor ray", "executor='ray'")
            raise GenError(f"{address} is only for {ray}", field=address, expected=ray)
        return self
