"""The recipe options of log and conversations: none yet (both follow the recipe's timeline), declared so every
product has its options model and a recipe key given to either is refused by name."""

from __future__ import annotations

from gen.recipe import StrictModel


class LogOptions(StrictModel):
    pass


class ConversationsOptions(StrictModel):
    pass
