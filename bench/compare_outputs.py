"""Run every recipe in recipes/ on the shared samples and fingerprint what it writes, so a refactor can show its
outputs are byte-identical before and after.

    python bench/compare_outputs.py --write before.json            # at the old commit (PYTHONPATH=<its checkout>)
    python bench/compare_outputs.py --against before.json          # at the new one: lists every file that differs
    python bench/compare_outputs.py --against before.json --rerun  # and each recipe run again on its cache

Each recipe's sources are pointed at GEN_SHARED_DATA (default ../shared/data) and its endpoints at a scripted
OpenAI-compatible server on 127.0.0.1 (the tests' fake models), with a fresh LLM cache. Every written file is
hashed as written, run.json without its timings. With --rerun each recipe then runs again on the cache the first
run filled (its replies and plans), and every file must come out as the first run wrote it; run.json is compared
without its LLM accounting there, which counts replies taken from the cache instead of calls made.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml

from tests.fakes.openai_server import FakeOpenAI, tcq_question
from tests.test_persona_sql_samples import scripted as persona_sql_model
from tests.test_teabag_product import SampleModel

SHARED = Path(os.environ.get("GEN_SHARED_DATA", ROOT.parent / "shared" / "data"))
MSC_3 = "msc/parlai_msc_v0.1_sample/msc/msc_dialogue/session_3/test.txt"
THEANINE = "teabag/theanine_sample/sample_dialogue.json"
# recipe → (the sample its sources read, the scripted model, changes the sample needs: timeline keys, and teabag
# options)
SAMPLES: dict[str, tuple[str | None, object, dict]] = {
    "quickstart": (None, None, {}),
    "cc-log": (THEANINE, None, {"padding": {"mode": "none"}}),  # one conversation: no donor for padding
    "msc-log": (MSC_3, None, {}),
    "locomo-temporal": ("locomo/locomo10.json", tcq_question, {}),
    "local-model": (None, tcq_question, {}),
    "msc-persona-sql": (MSC_3, persona_sql_model, {"persona_sql": {"max_reject_rate": 1.0}}),  # it rejects 1 in 9
    # the tests' model writes no verdicts; the msc sample's episodes have three sessions
    "teabag-msc": (MSC_3, SampleModel(), {"teabag": {"sessions": 3, "verify": False}}),
    "teabag-cc": (THEANINE, SampleModel(), {"teabag": {"verify": False}}),
}
PORT = 47613  # fixed, so the endpoint's base_url (which enters the run's fingerprints) is the same every run


def prepared(recipe: Path, folder: Path, base_url: str | None) -> Path:
    data = yaml.safe_load(recipe.read_text())
    sample, _, changes = SAMPLES[data["name"]]
    for source in data["sources"]:
        source["path"] = str(SHARED / sample) if sample else str((recipe.parent / source["path"]).resolve())
        if sample == THEANINE:  # the sample has no time_interval
            source.setdefault("default_interval", "A few days after")
    if "padding" in changes:
        data["timeline"]["padding"] = changes["padding"]
    for endpoint in data.get("llm", {}).values():
        endpoint.update(base_url=base_url, api_key_env=None, structured_output="json_schema")  # no probe to script
    for product in data["products"]:
        product.update(changes.get(product["type"], {}))
    path = folder / recipe.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def without_timings(value: object) -> object:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in ("timings_s", "seconds")}
    return [without_timings(v) for v in value] if isinstance(value, list) else value


def fingerprint(folder: Path, *, rerun: bool = False) -> dict[str, str]:
    """Each file's sha256; run.json's without its timings and, for a re-run, without the LLM accounting (which
    counts the replies the cache gave instead of the calls the first run made)."""
    prints = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "run.json":  # timings vary from run to run
            report = without_timings(json.loads(data))
            if rerun and isinstance(report, dict):
                report = {**report, "llm": report.get("llm") and "(calls counted differently on a re-run)"}
            data = json.dumps(report, sort_keys=True).encode()
        prints[str(path.relative_to(folder))] = hashlib.sha256(data).hexdigest()
    return prints


def gen_run(name: str, path: Path, out: Path, cache: Path) -> None:
    args = ["run", str(path), "--output-dir", str(out), "--cache-dir", str(cache)]
    done = subprocess.run([sys.executable, "-m", "gen", *args], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{name}: gen run exited {done.returncode}: {done.stderr[-2000:]}")


def run_all(rerun: bool = False) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The fingerprints of each recipe's run and, with `rerun`, the files that differ in a second run on the
    first run's cache (run.json compared without its LLM accounting)."""
    results, rerun_differ = {}, []
    for recipe in sorted((ROOT / "recipes").glob("*.yaml")):
        name = yaml.safe_load(recipe.read_text())["name"]
        model = SAMPLES[name][1]
        with tempfile.TemporaryDirectory() as tmp, FakeOpenAI(model, port=PORT) as server:
            path = prepared(recipe, Path(tmp), server.base_url if model else None)
            first, again, cache = Path(tmp) / "out", Path(tmp) / "again", Path(tmp) / "cache"
            gen_run(name, path, first, cache)
            results[name] = fingerprint(first / name)
            if rerun:
                gen_run(name, path, again, cache)
                then, now = fingerprint(first / name, rerun=True), fingerprint(again / name, rerun=True)
                rerun_differ += differing({name: then}, {name: now}, " (re-run)")
            print(f"{name}: {len(results[name])} files", file=sys.stderr)
    return results, rerun_differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="save the fingerprints here")
    parser.add_argument("--against", type=Path, help="compare with fingerprints saved by --write")
    parser.add_argument("--rerun", action="store_true", help="also run each recipe again on the first run's cache")
    args = parser.parse_args()
    results, rerun_differ = run_all(args.rerun)
    total = sum(len(files) for files in results.values())
    if args.write:
        args.write.write_text(json.dumps(results, indent=1, sort_keys=True))
    differ = differing(json.loads(args.against.read_text()), results, "") if args.against else []
    if args.against:
        print(f"{len(results)} recipes, {total} files: {len(differ)} differ")
    if args.rerun:
        print(f"re-run on the first run's cache: {total} files, {len(rerun_differ)} differ from the first run")
    for line in differ + rerun_differ:
        print(f"  {line}")
    return 1 if differ or rerun_differ else 0


def differing(before: dict[str, dict[str, str]], results: dict[str, dict[str, str]], label: str) -> list[str]:
    return [
        f"{name}{label}/{file}"
        for name in sorted(set(before) | set(results))
        for file in sorted(set(before.get(name, {})) | set(results.get(name, {})))
        if before.get(name, {}).get(file) != results.get(name, {}).get(file)
    ]


if __name__ == "__main__":
    sys.exit(main())
