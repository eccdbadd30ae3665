"""The one seeded draw of the time-query products: which of a base question's wordings (or dialogue variants)
it keeps. The draw follows from (recipe seed, product, conversation, group) alone, so any worker, in any order,
draws the same ones; the validators draw again from the full list."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

Variant = TypeVar("Variant")
# The product part of the key of the draw that picks a test's abstention questions among its empty windows (the
# group part is the test): time_queries draws with it, its validator draws again.
ABSTENTION_DRAW = "time_queries/abstentions"


def seeded_draw(n: int, limit: int | None, seed: int, product: str, conversation_id: str, group: str) -> Sequence[int]:
    """The positions, in order, of the wordings a base question with n of them keeps. A sample of all n is
    all of them, so the random draw is only made when the limit leaves some out."""
    if limit is None or limit >= n:
        return range(n)
    rng = random.Random(f"{seed}/{product}/{conversation_id}/{group}")
    return sorted(rng.sample(range(n), limit))


def pick(
    variants: Sequence[Variant], limit: int | None, seed: int, product: str, conversation_id: str, group: str
) -> list[Variant]:
    """The variants at the drawn positions, in their original order."""
    return [variants[i] for i in seeded_draw(len(variants), limit, seed, product, conversation_id, group)]
