"""Run every recipe in recipes/ on the shared samples and fingerprint what it writes, so a refactor can show its
outputs are byte-identical before and after.

    python bench/compare_outputs.py --write before.json            # at the old commit (PYTHONPATH=<its checkout>)
    python bench/compare_outputs.py --against before.json          # at the new one: lists every file that differs

Each recipe's sources are pointed at GEN_SHARED_DATA (default ../shared/data) and its endpoints at a scripted
OpenAI-compatible server on 127.0.0.1 (the tests' fake models), with a fresh LLM cache. Every written file is
hashed as written, run.json without its timings.
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


def fingerprint(folder: Path) -> dict[str, str]:
    prints = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "run.json":  # timings vary from run to run
            data = json.dumps(without_timings(json.loads(data)), sort_keys=True).encode()
        prints[str(path.relative_to(folder))] = hashlib.sha256(data).hexdigest()
    return prints


def run_all() -> dict[str, dict[str, str]]:
    results = {}
    for recipe in sorted((ROOT / "recipes").glob("*.yaml")):
        name = yaml.safe_load(recipe.read_text())["name"]
        model = SAMPLES[name][1]
        with tempfile.TemporaryDirectory() as tmp, FakeOpenAI(model, port=PORT) as server:
            path = prepared(recipe, Path(tmp), server.base_url if model else None)
            args = ["run", str(path), "--output-dir", f"{tmp}/out", "--cache-dir", f"{tmp}/cache"]
            done = subprocess.run([sys.executable, "-m", "gen", *args], capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{name}: gen run exited {done.returncode}: {done.stderr[-2000:]}")
            results[name] = fingerprint(Path(tmp) / "out" / name)
            print(f"{name}: {len(results[name])} files", file=sys.stderr)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="save the fingerprints here")
    parser.add_argument("--against", type=Path, help="compare with fingerprints saved by --write")
    args = parser.parse_args()
    results = run_all()
    if args.write:
        args.write.write_text(json.dumps(results, indent=1, sort_keys=True))
    if args.against:
        before = json.loads(args.against.read_text())
        differ = [
            f"{name}/{file}"
            for name in sorted(set(before) | set(results))
            for file in sorted(set(before.get(name, {})) | set(results.get(name, {})))
            if before.get(name, {}).get(file) != results.get(name, {}).get(file)
        ]
        total = sum(len(files) for files in results.values())
        print(f"{len(results)} recipes, {total} files: {len(differ)} differ")
        for line in differ:
            print(f"  {line}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
