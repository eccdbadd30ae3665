"""The `source_metadata` struct of the `conversations` record: what each source adapter says about a
conversation beyond its dialogue, one declared field per key the adapters write, JSON text for the rest."""

from __future__ import annotations

import json
from typing import Any

from gen.products.schema import STRING, Type, list_of, struct

# The metadata keys the source adapters write, with their shapes: "str", [shape] (a list), {key: shape} (an
# object with those keys), or "personas" ({speaker: [fact, ...]}, stored like the record's `personas`).
METADATA_SHAPES: dict[str, Any] = {
    "sample_id": "str",  # locomo
    "relationship": "str",  # cc
    "summary": ["str"],  # cc: one summary per session
    "time_interval": ["str"],  # cc: "Start", then the phrase before each later session
    "self_instruct": {"question": "str", "answer": "str"},  # msc_self_instruct
    "init_personas": "personas",  # msc: the PersonaChat personas the episode began with
    "summary_speaker_1": [["str"]],  # msc_self_instruct: facts per session
    "summary_speaker_2": [["str"]],
}
OTHER_METADATA = "other_json"  # keys not in the table (or not of its shape), as one JSON object


def fits(value: Any, shape: Any) -> bool:
    if value is None:
        return True
    if shape == "str":
        return isinstance(value, str)
    if shape == "personas":
        return isinstance(value, dict) and all(isinstance(k, str) and fits(v, ["str"]) for k, v in value.items())
    if isinstance(shape, list):
        return isinstance(value, list) and all(fits(item, shape[0]) for item in value)
    return isinstance(value, dict) and set(value) <= set(shape) and all(fits(value[k], shape[k]) for k in value)


def source_metadata(metadata: dict) -> dict:
    """The adapter's metadata as a struct: every known key (null when absent), the rest as JSON text."""
    out: dict[str, Any] = dict.fromkeys(METADATA_SHAPES)
    other = {}
    for key, value in metadata.items():
        if key in METADATA_SHAPES and fits(value, METADATA_SHAPES[key]):
            out[key] = personas_list(value) if METADATA_SHAPES[key] == "personas" else value
        else:
            other[key] = value
    out[OTHER_METADATA] = json.dumps(other, sort_keys=True, ensure_ascii=False) if other else None
    return out


def personas_list(personas: dict | None) -> list[dict] | None:
    if personas is None:
        return None
    return [{"speaker": speaker, "facts": facts} for speaker, facts in personas.items()]


def metadata_feature(shape: Any) -> Type:
    if shape == "str":
        return STRING
    if shape == "personas":
        return list_of(struct({"speaker": STRING, "facts": list_of(STRING)}))
    if isinstance(shape, list):
        return list_of(metadata_feature(shape[0]))
    return struct({key: metadata_feature(sub) for key, sub in shape.items()})
