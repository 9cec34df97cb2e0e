"""What the model is actually sent: the persona's system prompt (with the deployment's facts)
first, then the conversation; for a knowledge file too large to inline, the sections that
match the question ride along with the last user message.

The system prompt never changes during a server's life, and retrieved facts are attached to
the newest message only, so every prompt starts with the same tokens as the last one: the
engine's KV cache (persona, facts, earlier turns) is reused, and a turn prefills only its
own words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engines.llm.base import ChatMessage
from engines.llm.errors import InvalidInputError
from engines.llm.knowledge import Knowledge, Retriever, fact_lines
from engines.llm.personas import example_knowledge, example_openers, persona, system_prompt
from engines.tools.calls import is_tool_response
from engines.tools.prompt import reminder as tools_reminder
from engines.tools.prompt import tools_block
from engines.tools.spec import ToolSet


@dataclass(frozen=True)
class PromptBuilder:
    system: str
    retriever: Retriever | None = None
    reminder: str | None = None  # appended to every user message (the same way every time)
    facts: str = ""  # the deployment's facts as given (figure checks), "" for none
    stops: tuple[str, ...] = ()  # where an answer has run into a worked example's format

    @classmethod
    def for_persona(
        cls,
        persona_name: str,
        agent_name: str = "Ava",
        knowledge: str | None = None,
        system_override: str | None = None,
        language: str = "en",
        tools: ToolSet | None = None,
    ) -> PromptBuilder:
        """`knowledge`: a file path, "" for none, None for the persona's example file (in
        `language`, as the persona's texts). `tools`: declared, they end the system prompt
        (`engines/tools/prompt.py`) and lead the reminder."""
        path = (
            example_knowledge(persona_name, language) if knowledge is None else (knowledge or None)
        )
        facts = Knowledge.load(path) if path is not None else None
        inline = fact_lines(facts.text) if facts is not None and facts.inline else None
        if system_override:
            system = system_override + (f"\n\nFACTS:\n{inline}\nEND OF FACTS." if inline else "")
        else:
            retrieved = facts is not None and not facts.inline
            system = system_prompt(
                persona_name, agent_name, inline, retrieved=retrieved, language=language,
                acts=tools is not None,
            )
        retriever = facts.index() if facts is not None and not facts.inline else None
        reminder = persona(persona_name, language).reminder if facts is not None else None
        if tools is not None:
            system += tools_block(tools, language)
            reminder = tools_reminder(reminder, language)
        # The worked examples are in the prompt when it has facts (`system_prompt`).
        stops = example_openers(persona_name, language) if facts is not None else ()
        return cls(system, retriever, reminder, facts.text if facts is not None else "", stops)

    def messages(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """System prompt + conversation (a caller's own system message replaces ours)."""
        msgs = [m for m in messages if m.content.strip() or m.role == "assistant"]
        if not msgs or msgs[-1].role != "user":
            raise InvalidInputError("the last message must be the user's")
        if self.reminder is not None:
            # Every user message, not only the last: earlier turns then read exactly as they
            # did when they were new, and the KV cache of the conversation stays reusable.
            msgs = [
                ChatMessage("user", f"{m.content}\n{self.reminder}")
                if m.role == "user" and not is_tool_response(m.content) else m
                for m in msgs
            ]
        if msgs[0].role != "system":
            msgs.insert(0, ChatMessage("system", self.system))
        if self.retriever is not None and not is_tool_response(msgs[-1].content):
            question = messages[-1].content
            found = self.retriever.relevant(question)
            facts = "\n".join(fact_lines(s) for s in found) if found else "(none)"
            msgs[-1] = ChatMessage("user", f"FACTS:\n{facts}\nEND OF FACTS.\n\n{msgs[-1].content}")
        return msgs
