"""What a ready persona is made of: its own texts and its language's shared ones.

The English personas (`engines.llm.personas`) and the Chinese ones (`personas_zh`) are built
of these, and `personas` looks the Chinese ones up, so the types have a module of their own:
the imports go one way. A persona carries its language's `Templates`, so its reminder needs no
look-up by language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Templates:
    """A language's shared prompt texts ({name}, {scope}, {fallback} filled in)."""

    spoken: str
    identity: str
    grounding: str
    no_facts: str
    reminder: str
    retrieved: str  # said when the facts come with each question
    examples: str  # the heading of the worked examples
    shot: str  # one worked example: {said}, {question}, {answer}


@dataclass(frozen=True)
class Persona:
    role: str  # who the agent is, one paragraph
    scope: str  # what "about the deployment" means for the facts rule
    fallback: str  # the next step it offers when the facts are silent
    temperature: float
    example_knowledge: str | None  # file name in personas.KNOWLEDGE_DIR
    unknown: str  # said instead of a figure the facts do not hold (engines.llm.grounding)
    known_figures_only: bool  # the default of `[llm] known_figures_only`
    templates: Templates  # its language's shared texts (personas.ENGLISH, personas_zh.CHINESE)
    examples: tuple[tuple[str, str, str], ...] = ()  # (what the FACTS say, question, answer)
    # Texts of `role`, `scope` or an example's question that hold only for an agent without
    # tools ("You cannot see the customer's accounts"): dropped when the deployment has tools.
    without_tools: tuple[str, ...] = ()

    @property
    def reminder(self) -> str:
        """The line that rides with every question when the deployment has facts."""
        # The scope's first item ("the bank", "这家银行"): short, as the reminder is read
        # with every question.
        return self.templates.reminder.format(scope=re.split("[,，、]", self.scope)[0])
