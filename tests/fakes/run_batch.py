"""A stand-in for vLLM's ``run_batch``: answers every line of a request file in the OpenAI batch layout and writes
the output file, with the replies of the fake server's scripts.

    python tests/fakes/run_batch.py -i requests.jsonl -o results.jsonl [--script tcq|echo]

Like ``python -m vllm.entrypoints.openai.run_batch -i ... -o ... --model ...``, it reads the file the way any
batch runner must (each line's ``custom_id``, ``url`` and ``body``) and answers each line with
``{"id", "custom_id", "response": {"status_code": 200, "request_id", "body"}, "error": null}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeRequest, _as_reply, _reply_body, body_key, tcq_question

SCRIPTS = {"tcq": tcq_question, "echo": lambda request: "ok"}


def answer_file(source: Path, target: Path, script=tcq_question) -> int:
    lines = 0
    with source.open(encoding="utf-8") as requests, target.open("w", encoding="utf-8") as out:
        for number, raw in enumerate(requests):
            line = json.loads(raw)
            assert line["method"] == "POST" and line["url"] in ("/v1/chat/completions", "/v1/completions")
            request = FakeRequest(number, line["body"], {}, body_key(line["body"]), 0)
            body = _reply_body(request, _as_reply(script(request)))
            response = {"status_code": 200, "request_id": f"req-{number}", "body": body}
            out.write(
                json.dumps(
                    {"id": f"vllm-{number}", "custom_id": line["custom_id"], "response": response, "error": None}
                )
                + "\n"
            )
            lines += 1
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-i", "--input-file", required=True, type=Path)
    parser.add_argument("-o", "--output-file", required=True, type=Path)
    parser.add_argument("--script", choices=sorted(SCRIPTS), default="tcq")
    args = parser.parse_args()
    answer_file(args.input_file, args.output_file, SCRIPTS[args.script])
    return 0


if __name__ == "__main__":
    sys.exit(main())
