"""What the model is actually sent: the persona's system prompt (with the deployment's facts)
first, then the conversation; for a knowledge file too large to inline, the sections that
match the question ride along with the last user message.

The system prompt never changes during a server's life, and retrieved facts are attached to
the newest message only, so every prompt starts with the same tokens as the last one: the
engine's KV cache (persona, facts, earlier turns) is reused, and a turn prefills only its
own words.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engines.llm.base import ChatMessage
from engines.llm.errors import InvalidInputError
from engines.llm.knowledge import Knowledge, Retriever
from engines.llm.personas import example_knowledge, system_prompt


@dataclass(frozen=True)
class PromptBuilder:
    system: str
    retriever: Retriever | None = None

    @classmethod
    def for_persona(
        cls,
        persona: str,
        agent_name: str = "Ava",
        knowledge: str | None = None,
        system_override: str | None = None,
    ) -> PromptBuilder:
        """`knowledge`: a file path, "" for none, None for the persona's example file."""
        path = example_knowledge(persona) if knowledge is None else (knowledge or None)
        facts = Knowledge.load(path) if path is not None else None
        if system_override:
            system = system_override
            if facts is not None and facts.inline:
                system += f"\n\nFACTS:\n{facts.text}\nEND OF FACTS."
        elif facts is None:
            system = system_prompt(persona, agent_name)
        elif facts.inline:
            system = system_prompt(persona, agent_name, facts.text)
        else:
            system = system_prompt(persona, agent_name, retrieved=True)
        retriever = facts.index() if facts is not None and not facts.inline else None
        return cls(system, retriever)

    def messages(
        self, messages: Sequence[ChatMessage], count_tokens: Callable[[str], int] | None = None
    ) -> list[ChatMessage]:
        """System prompt + conversation (a caller's own system message replaces ours)."""
        msgs = [m for m in messages if m.content.strip() or m.role == "assistant"]
        if not msgs or msgs[-1].role != "user":
            raise InvalidInputError("the last message must be the user's")
        if msgs[0].role != "system":
            msgs.insert(0, ChatMessage("system", self.system))
        if self.retriever is not None:
            question = msgs[-1].content
            found = self.retriever.relevant(question)
            facts = "\n\n".join(found) if found else "(nothing in the facts matches)"
            msgs[-1] = ChatMessage("user", f"FACTS:\n{facts}\nEND OF FACTS.\n\n{question}")
        return msgs
