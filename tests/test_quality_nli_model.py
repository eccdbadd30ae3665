"""quality_labels' nli_model: a local three-way classifier through transformers. The test builds a tiny randomly
initialised BERT classifier with its own word-level tokenizer, saves both to a temporary folder the way a
downloaded model is laid out, and checks that gen's batched, padded run gives for every reply-fact pair the
softmax a single unpadded forward pass gives, mapped to the labels by the config's class names; and that a model
whose classes are not named gets one clear error."""

from __future__ import annotations

import json

import pytest

from gen.errors import GenError
from tests.conftest import extra_marks, read_jsonl
from tests.test_quality_backends import DIALOG, PERSONAS, PREVIOUS, episode_recipe
from tests.test_quality_labels import bag_of_words  # noqa: F401  (the fixture)

pytestmark = extra_marks("nli", "transformers", "torch")

CLASSES = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}  # the order of a common MNLI head


def tiny_model(folder, classes=CLASSES):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    words = sorted({w.lower() for text in [*PREVIOUS, *DIALOG, *PERSONAS[0], *PERSONAS[1]] for w in text.split()})
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=len(classes),
        id2label=classes,
        label2id={name: index for index, name in classes.items()},
    )
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    return folder


def one_by_one(folder, premise: str, hypothesis: str) -> dict[str, float]:
    """The softmax of one unpadded forward pass, each class named by hand from CLASSES."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(**tokenizer(premise, hypothesis, return_tensors="pt")).logits[0]
    p = torch.softmax(logits, dim=-1).tolist()
    return {"contradiction": p[0], "neutral": p[1], "entailment": p[2]}


def test_a_local_model_gives_each_pair_the_softmax_of_its_own_forward_pass(tmp_path, bag_of_words):  # noqa: F811
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe

    folder = tiny_model(tmp_path / "nli")
    out = run(
        load_recipe(episode_recipe(tmp_path, {"nli_model": str(folder)})), RunOptions(output_dir=tmp_path / "out")
    )
    report = json.loads((out / "run.json").read_text())
    assert report["validation"]["quality_labels"]["passed"]
    assert report["configs"]["quality_turns"]["summary"]["backends"]["nli"] == "transformers model nli, softmax"
    rows = read_jsonl(out / "quality_turns" / "test.jsonl")
    texts = PREVIOUS + DIALOG
    for row, text in zip(rows, texts):
        facts = PERSONAS[0 if row["speaker"] == "Speaker 1" else 1]
        assert row["persona_facts"] == facts
        for k, fact in enumerate(facts):
            expected = one_by_one(folder, fact, text)
            found = {"entailment": row["p_entail"][k], "contradiction": row["p_contradict"][k]}
            found["neutral"] = row["p_neutral"][k]
            assert found == pytest.approx(expected, abs=1e-5)
        expected_r1 = sum(row["p_entail"]) - 2 * sum(row["p_contradict"])
        assert row["r1"] == pytest.approx(expected_r1, abs=1e-5)


def test_a_model_whose_classes_are_not_named_is_refused(tmp_path):
    from gen.products.quality import nli_model

    folder = tiny_model(tmp_path / "unnamed", classes={0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    with pytest.raises(GenError) as error:
        nli_model.load(str(folder))
    assert error.value.field == "id2label" and "LABEL_0" in str(error.value)


def test_the_methods_worked_example_with_a_real_nli_model():
    """A priest who says he works as a mechanic contradicts himself, for any real three-way NLI model: set
    GEN_NLI_MODEL to the folder of one (for example a RoBERTa or DeBERTa MNLI model saved by transformers)."""
    import os

    from gen.products.quality import nli_model

    folder = os.environ.get("GEN_NLI_MODEL")
    if not folder:
        pytest.skip("GEN_NLI_MODEL is not set: give it the folder of a real NLI model to run the worked example")
    [probabilities] = nli_model.load(folder).probabilities([("I am a priest.", "I work as a mechanic.")])
    assert max(probabilities, key=probabilities.__getitem__) == "contradiction", probabilities
