"""One run: recipe → sources → timelines → products → validators → writer (SPEC §2)."""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable

from gen import products as product_registry
from gen.card import render_card
from gen.errors import GenError
from gen.model import Conversation
from gen.recipe import Recipe
from gen.sources import load_source, select
from gen.timeline import Timeline, build_timeline
from gen.writer import RunFolder, write_json, write_jsonl

PACKAGES = ("gen", "datasets", "openai", "jinja2", "num2words", "pydantic", "huggingface-hub", "python-dateutil")
Say = Callable[[str], None]


@dataclass
class Prepared:
    """Sources loaded and selected, timelines built: what `gen validate`, `gen run` and `gen plan` share."""

    recipe: Recipe
    conversations: list[Conversation]
    timelines: list[Timeline]
    sources: list[dict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def context(self) -> product_registry.BuildContext:
        return product_registry.BuildContext(recipe=self.recipe, conversations=self.conversations,
                                             timelines=self.timelines)


def prepare(recipe: Recipe, limit: int | None = None, say: Say = lambda _: None) -> Prepared:
    started = time.perf_counter()
    conversations, timelines, sources = [], [], []
    for spec in recipe.sources:
        pool = load_source(spec)
        chosen = select(pool, spec)[:limit] if limit is not None else select(pool, spec)
        say(f"{spec.format}: {len(chosen)} of {len(pool)} conversations from {spec.origin}")
        sources.append({"format": spec.format, "origin": spec.origin, "origin_name": Path(spec.origin).name,
                        "loaded": len(pool), "selected": len(chosen)})
        conversations.extend(chosen)
        timelines.extend(build_timeline(c, recipe.timeline, pool, recipe.seed) for c in chosen if c.sessions)
    if not conversations:
        raise GenError("the sources and selection leave no conversation", file=recipe.file, field="sources",
                       expected="at least one conversation")
    ids = [c.conversation_id for c in conversations]
    if duplicates := sorted({i for i in ids if ids.count(i) > 1}):
        raise GenError(f"conversation ids appear in more than one source: {', '.join(duplicates[:5])}",
                       file=recipe.file, field="sources")
    return Prepared(recipe, conversations, timelines, sources, {"prepare": time.perf_counter() - started})


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def output_folder(recipe: Recipe, output_dir: Path | None) -> Path:
    base = output_dir or recipe.output_dir or Path("outputs")
    return Path(base) / recipe.name


def run(recipe: Recipe, output_dir: Path | None = None, limit: int | None = None, say: Say = lambda _: None,
        llm_settings=None) -> Path:
    """Build, validate and write the run. `llm_settings` (gen.llm.RunSettings) are run-only LLM overrides."""
    prepared = prepare(recipe, limit, say)
    ctx = prepared.context()
    if llm_settings is not None:
        ctx.services["llm_settings"] = llm_settings
    try:
        final = build_and_write(recipe, prepared, ctx, output_dir, say)
    finally:
        if "llm" in ctx.services:
            ctx.services["llm"].close()
    if recipe.export.hub is not None:  # `export: {hub: ...}`: publish the run just written (gen/export/hub.py)
        from gen.export.hub import push_after_run
        push_after_run(final, recipe.export.hub, ctx.templates_dir, say)
    return final


def build_and_write(recipe: Recipe, prepared: Prepared, ctx, output_dir: Path | None, say: Say) -> Path:
    final = output_folder(recipe, output_dir)
    report = {"recipe": {"name": recipe.name, "file": recipe.file.name, "fingerprint": recipe.fingerprint,
                         "seed": recipe.seed},
              "packages": package_versions(), "split": recipe.split, "sources": prepared.sources,
              "configs": {}, "validation": {}, "timings_s": dict(prepared.timings)}
    entries = recipe.product_options()
    for name in product_registry.ALWAYS_BUILT:
        if name not in [n for n, _ in entries]:
            entries.append((name, product_registry.REGISTRY[name].Options()))
    with RunFolder(final) as folder:
        for name, options in entries:
            build_product(name, options, ctx, folder.path, report, say)
        failed = [name for name, result in report["validation"].items() if not result["passed"]]
        rejects = list(ctx.rejects)
        if "llm" in ctx.services:  # calls made, cached, failed, tokens and cost per step; the engine's rejects
            report["llm"] = ctx.services["llm"].report()
            rejects += ctx.services["llm"].rejects
        report["rejects"] = len(rejects)
        (folder.path / "recipe.yaml").write_bytes(recipe.file.read_bytes())
        write_jsonl(folder.path / "rejects.jsonl", rejects)
        write_json(folder.path / "run.json", report)
        (folder.path / "README.md").write_text(render_card(report, ctx.templates_dir, folder=folder.path,
                                                           previous=final / "README.md"), encoding="utf-8")
        if failed:
            folder.keep_failed_at = final.parent / f".{final.name}.failed"
            raise GenError(f"validation failed for {', '.join(failed)}; nothing was published. The records and "
                           f"run.json are kept for inspection in {folder.keep_failed_at}", file=recipe.file)
    return final


def build_product(name: str, options, ctx, folder: Path, report: dict, say: Say) -> None:
    product = product_registry.REGISTRY[name]
    started = time.perf_counter()
    rows = list(product.build(ctx, options))
    built = time.perf_counter()
    checks = product.validate(rows, ctx, options)
    validated = time.perf_counter()
    path = f"{name}/{ctx.recipe.split}.jsonl"
    write_jsonl(folder / path, rows)
    info = {"records": len(rows), "path": path, "description": product.DESCRIPTION}
    if hasattr(product, "summary"):
        info["summary"] = product.summary(rows)
    report["configs"][name] = info
    report["validation"][name] = {"passed": checks.passed, "checks": checks.report()}
    report["timings_s"][name] = {"build": built - started, "validate": validated - built,
                                 "write": time.perf_counter() - validated}
    say(f"{name}: {len(rows):,} records, validation {'passed' if checks.passed else 'FAILED'}")
