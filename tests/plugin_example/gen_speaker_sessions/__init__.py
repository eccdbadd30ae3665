"""speaker_sessions: for every real session and each of its two speakers, "what did <speaker> talk about in
session <n>?", with that speaker's responses of that session as the relevant ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from gen.products.base import BuildContext, ConfigSpec, ConversationProduct, Needs, Questions, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.schema import INT64, STRING, TIMESTAMP, list_of, schema
from gen.recipe import StrictModel
from gen_speaker_sessions.checking import check_questions

NAME = "speaker_sessions"
DESCRIPTION = "what one speaker said in one session, with that speaker's responses of the session as the answer"
QUESTION = "speaker_sessions/question.j2"


def templates_dir() -> Path:
    """This package's templates, found by gen through the `gen.templates` entry point."""
    return Path(__file__).parent / "templates"


class SpeakerSessionsOptions(StrictModel):
    min_responses: int = Field(2, ge=1, description="ask only where the speaker has at least this many responses")


FEATURES = schema(
    {
        "question_id": STRING,
        "conversation_id": STRING,
        "test": STRING,
        "speaker": STRING,
        "session_index": INT64,
        "question": STRING,
        "relevant_response_indices": list_of(INT64),
        "now": TIMESTAMP,
    }
)


class SpeakerSessions(ConversationProduct[SpeakerSessionsOptions]):
    name = NAME
    description = DESCRIPTION
    Options = SpeakerSessionsOptions
    configs = (ConfigSpec(NAME, DESCRIPTION, FEATURES, questions=Questions("test", asked_by_speaker_a=False)),)
    needs = Needs(timelines=True, products=("log",))

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        timeline = unit.stamped
        for session in range(1, timeline.num_real_sessions + 1):
            for speaker in timeline.conversation.speakers:
                said = [
                    r.response_index for r in timeline.responses if (r.session_index, r.speaker) == (session, speaker)
                ]
                if len(said) < self.options.min_responses:
                    continue
                question = ctx.templates.render(QUESTION, speaker=speaker, session=session).strip()
                yield (
                    NAME,
                    {
                        "question_id": f"{unit.conversation_id}/{NAME}/{session}/{speaker}",
                        "conversation_id": unit.conversation_id,
                        "test": "speaker_session",
                        "speaker": speaker,
                        "session_index": session,
                        "question": question,
                        "relevant_response_indices": said,
                        "now": timeline.now.isoformat(timespec="seconds"),
                    },
                )

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        check_questions(records[NAME], unit.records_of("log"), self.options.min_responses, checks)
