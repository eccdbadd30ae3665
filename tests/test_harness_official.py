"""gen's exports scored by the harnesses' own code, and the results read back with `gen import-predictions`.

For the same ranked predictions (gen's `recent` and `bm25` baselines on the quickstart, first 10 responses),
LongMemEval's retrieval scoring (tests/official/longmemeval_retrieval.py), LoCoMo's evidence recall
(tests/official/locomo_evaluation.py) and BEIR's EvaluateRetrieval must print the number `gen eval` reports as
its pooled figure: LongMemEval's recall_any / recall_all are gen's "any found" / "all found", LoCoMo's recall and
BEIR's Recall@10 gen's pooled recall. The official side reads only the exported files; the harness's own output
(a retrieval log, a QA output file, a run dict) goes back through `gen import-predictions`. The quickstart run
and its exports are fixtures of tests/conftest.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import extra_marks, read_jsonl, requires_extra, run_cli
from tests.official import locomo_evaluation, longmemeval_retrieval

K = 10
CONFIGS = ("time_queries", "ambiguous_time_queries")
BASELINES = [
    pytest.param("recent", id="recent"),
    pytest.param("bm25", id="bm25", marks=extra_marks("eval", "bm25s")),
]


@pytest.fixture(scope="module")
def predictions(quickstart, tmp_path_factory):
    """baseline name → its predictions file (every question config, the first K responses of each ranking)."""
    folder = tmp_path_factory.mktemp("predictions")
    made: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in made:
            from gen.cli import app

            made[name] = folder / f"{name}.jsonl"
            app(["baseline", name, str(quickstart), "--output", str(made[name]), "--k", str(K)], standalone_mode=False)
        return made[name]

    return make


def ranked(path: Path) -> dict[str, list[int]]:
    return {line["question_id"]: line["retrieved"] for line in read_jsonl(path)}


def gen_eval(dataset: Path, predictions: Path, tmp_path: Path, capsys, *options) -> dict:
    scores = tmp_path / f"scores-{predictions.stem}.json"
    code, _, err = run_cli(["eval", dataset, "--predictions", predictions, "--json", scores, *options], capsys)
    assert code == 0, err
    return json.loads(scores.read_text())["configs"]


def import_predictions(results: Path, format_name: str, export: Path | None, tmp_path: Path, capsys) -> Path:
    output = tmp_path / f"imported-{format_name}-{results.stem}.jsonl"
    options = ["--export", export] if export is not None else []
    code, _, err = run_cli(
        ["import-predictions", results, "--format", format_name, *options, "--output", output], capsys
    )
    assert code == 0, err
    return output


# --- LongMemEval ----------------------------------------------------------------------------------------------


def corpus(instance: dict, granularity: str) -> list[str]:
    """The corpus ids run_retrieval.py builds for one instance, with its own function."""
    ids: list[str] = []
    for session_id, session, date in zip(
        instance["haystack_session_ids"], instance["haystack_sessions"], instance["haystack_dates"], strict=True
    ):
        ids += longmemeval_retrieval.process_item_flat_index(session, granularity, session_id, date)[1]
    return ids


def retrieval_log_line(instance: dict, corpus_ids: list[str], rankings: list[int]) -> dict:
    """What run_retrieval.py writes per instance (the fields gen reads, and the question's own)."""
    return {
        "question_id": instance["question_id"],
        "question": instance["question"],
        "answer_session_ids": instance["answer_session_ids"],
        "retrieval_results": {"ranked_items": [{"corpus_id": corpus_ids[rid]} for rid in rankings]},
    }


@pytest.mark.parametrize("baseline", BASELINES)
def test_longmemeval_turn_level_recall_is_gens_all_and_any_found(
    baseline,
    quickstart,
    exports,
    predictions,
    tmp_path,
    capsys,
):
    mine = ranked(predictions(baseline))
    export = exports["longmemeval"]
    for config in CONFIGS:
        instances = json.loads((export / f"{config}.json").read_text())
        recall_any, recall_all, log = [], [], []
        for instance in instances:
            corpus_ids = corpus(instance, "turn")
            # every turn is a user turn, in response order: a response's index is its place in the corpus
            assert len(corpus_ids) == sum(len(session) for session in instance["haystack_sessions"])
            correct = list({doc for doc in corpus_ids if "answer" in doc})
            assert correct, instance["question_id"]  # the evidence is found by the official rule (the bug was none)
            rankings = mine[instance["question_id"]]
            found_any, found_all, _ = longmemeval_retrieval.evaluate_retrieval(rankings, correct, corpus_ids, k=K)
            recall_any.append(found_any)
            recall_all.append(found_all)
            log.append(retrieval_log_line(instance, corpus_ids, rankings))
        results = tmp_path / f"retrievallog_turn_{config}"
        results.write_text("".join(json.dumps(line) + "\n" for line in log))
        imported = import_predictions(results, "longmemeval", export, tmp_path, capsys)
        assert ranked(imported) == {line["question_id"]: mine[line["question_id"]] for line in log}
        pooled = gen_eval(quickstart, imported, tmp_path, capsys, "--k", str(K), "--questions-from", export)[config]
        assert pooled["questions"] == len(instances)  # the other wordings are not counted as missing
        assert pooled["pooled"]["any_found"] == pytest.approx(float(np.mean(recall_any)))
        assert pooled["pooled"]["all_found"] == pytest.approx(float(np.mean(recall_all)))


@pytest.mark.parametrize("baseline", BASELINES)
def test_longmemeval_session_level_recall_is_gens_on_the_sessions_responses(
    baseline,
    quickstart,
    exports,
    predictions,
    tmp_path,
    capsys,
):
    """At session granularity the corpus is the sessions; a session ranking read back stands for its responses,
    and a gold session holds at least one relevant response, so the official recall_any@3 / recall_all@3 over
    sessions are gen's any / all found over the responses of the first 3 sessions."""
    sessions_kept = 3
    mine = ranked(predictions(baseline))
    export = exports["longmemeval"]
    instances = json.loads((export / "time_queries.json").read_text())
    recall_any, recall_all, log = [], [], []
    for instance in instances:
        corpus_ids = corpus(instance, "session")
        correct = list({doc for doc in corpus_ids if "answer" in doc})
        assert sorted(correct) == sorted(instance["answer_session_ids"])
        # gen's ranking of responses as a ranking of sessions: each session where its first response appears
        starts = np.cumsum([0] + [len(session) for session in instance["haystack_sessions"]])
        order = list(
            dict.fromkeys(int(np.searchsorted(starts, r, side="right")) - 1 for r in mine[instance["question_id"]])
        )
        rankings = order[:sessions_kept]
        found_any, found_all, _ = longmemeval_retrieval.evaluate_retrieval(
            rankings, correct, corpus_ids, k=sessions_kept
        )
        recall_any.append(found_any)
        recall_all.append(found_all)
        log.append(retrieval_log_line(instance, corpus_ids, rankings))
    results = tmp_path / "retrievallog_session"
    results.write_text("".join(json.dumps(line) + "\n" for line in log))
    imported = import_predictions(results, "longmemeval", export, tmp_path, capsys)
    scores = gen_eval(quickstart, imported, tmp_path, capsys, "--questions-from", export)["time_queries"]
    assert scores["pooled"]["any_found"] == pytest.approx(float(np.mean(recall_any)))
    assert scores["pooled"]["all_found"] == pytest.approx(float(np.mean(recall_all)))


def test_longmemeval_gold_sessions_have_every_turn_marked(exports):
    """The official session-level code reads has_answer on every user turn of an 'answer' session (a KeyError
    otherwise) and renames a session with none to 'noans'."""
    for config in CONFIGS:
        for instance in json.loads((exports["longmemeval"] / f"{config}.json").read_text()):
            corpus_ids = corpus(instance, "session")
            assert not any("noans" in doc for doc in corpus_ids)
            assert sum("answer" in doc for doc in corpus_ids) == len(instance["answer_session_ids"])


# --- LoCoMo ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("baseline", BASELINES)
def test_locomo_evidence_recall_is_gens_pooled_recall(
    baseline,
    quickstart,
    exports,
    predictions,
    tmp_path,
    capsys,
):
    mine = ranked(predictions(baseline))
    export = exports["locomo"]
    emb_dir = tmp_path / "emb"
    for config in CONFIGS:
        samples = json.loads((export / f"{config}.json").read_text())
        recalls = []
        for sample in samples:
            # LoCoMo's RAG code stores a database per sample at this path: it must be a file of emb_dir
            database = os.path.join(emb_dir, "%s_dialog_%s.pkl" % (config, sample["sample_id"]))  # noqa: UP031
            assert Path(database).parent == emb_dir
            dia_ids = [
                turn["dia_id"]
                for key, value in sample["conversation"].items()
                if key.startswith("session_") and isinstance(value, list)
                for turn in value
            ]
            for qa in sample["qa"]:
                # what get_rag_context returns for the top K: the retrieved turns' dia_ids, best first
                qa["gen_prediction"] = ""
                qa["gen_prediction_context"] = [dia_ids[index] for index in mine[qa["question_id"]][:K]]
            _, _, recall = locomo_evaluation.eval_question_answering(sample["qa"], eval_key="gen_prediction")
            recalls += recall
        scores = gen_eval(quickstart, predictions(baseline), tmp_path, capsys, "--k", str(K))[config]
        assert scores["pooled"]["recall"] == pytest.approx(float(np.mean(recalls)))
        # the QA output file, read back
        results = tmp_path / f"{config}_qa_output.json"
        results.write_text(json.dumps(samples))
        imported = import_predictions(results, "locomo", export, tmp_path, capsys)
        again = gen_eval(quickstart, imported, tmp_path, capsys)[config]
        assert again["pooled"]["recall"] == pytest.approx(float(np.mean(recalls)))


# --- BEIR -----------------------------------------------------------------------------------------------------


@requires_extra("beir", "beir", "pytrec_eval")
@pytest.mark.parametrize("baseline", BASELINES)
def test_beir_recall_at_10_is_gens_pooled_recall(baseline, quickstart, exports, predictions, tmp_path, capsys):
    from beir.datasets.data_loader import GenericDataLoader
    from beir.retrieval.evaluation import EvaluateRetrieval

    mine = ranked(predictions(baseline))
    export = exports["beir"]
    manifest = json.loads((export / "gen-export.json").read_text())
    for config in CONFIGS:
        qrels, results = {}, {}
        for folder in manifest["configs"][config]["folders"].values():
            _, queries, folder_qrels = GenericDataLoader(data_folder=str(export / config / folder)).load(split="test")
            qrels.update(folder_qrels)
            # a retriever's scores: higher first, in gen's order
            results.update({qid: {str(doc): 1.0 / (1 + rank) for rank, doc in enumerate(mine[qid])} for qid in queries})
        _, _, recall, _ = EvaluateRetrieval.evaluate(qrels, results, [K])
        scores = gen_eval(quickstart, predictions(baseline), tmp_path, capsys, "--k", str(K))[config]
        assert scores["pooled"]["recall"] == pytest.approx(recall[f"Recall@{K}"], abs=1e-5)  # BEIR rounds to 5 places
        run_dict = tmp_path / f"{config}-run.json"
        run_dict.write_text(json.dumps(results))
        imported = import_predictions(run_dict, "beir", None, tmp_path, capsys)
        assert ranked(imported) == {qid: mine[qid] for qid in results}


def test_a_trec_run_file_reads_back_in_score_order(tmp_path, capsys):
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 7 2 0.5 bm25\nq1 Q0 3 1 0.9 bm25\nq2 Q0 0 1 1.0 bm25\n")
    imported = import_predictions(run, "beir", None, tmp_path, capsys)
    assert ranked(imported) == {"q1": [3, 7], "q2": [0]}


@requires_extra("beir", "pytrec_eval")
def test_tied_scores_read_back_in_the_order_the_evaluator_ranks_them(tmp_path, capsys):
    """trec_eval orders tied documents by id as text, larger first: "7", "3", "10". pytrec_eval's recall at 1 and
    2 shows its order; the imported ranking must be the same."""
    import pytrec_eval

    scores = {"q": {"3": 1.0, "10": 1.0, "7": 1.0}}
    recall = {
        k: pytrec_eval.RelevanceEvaluator({"q": {"3": 1}}, {f"recall.{k}"}).evaluate(scores)["q"][f"recall_{k}"]
        for k in (1, 2)
    }
    assert recall == {1: 0.0, 2: 1.0}  # "3" is second
    run = tmp_path / "run.json"
    run.write_text(json.dumps(scores))
    assert ranked(import_predictions(run, "beir", None, tmp_path, capsys)) == {"q": [7, 3, 10]}


def test_an_id_the_export_did_not_write_is_one_message(exports, tmp_path, capsys):
    log = tmp_path / "log"
    log.write_text(
        json.dumps({"question_id": "x", "retrieval_results": {"ranked_items": [{"corpus_id": "nobody_s1_2"}]}}) + "\n"
    )
    code, _, err = run_cli(
        [
            "import-predictions",
            log,
            "--format",
            "longmemeval",
            "--export",
            exports["longmemeval"],
            "--output",
            tmp_path / "p.jsonl",
        ],
        capsys,
    )
    assert code == 2 and "line 1: corpus_id: 'nobody_s1_2' is not an id this export wrote" in err
    assert not (tmp_path / "p.jsonl").exists()
