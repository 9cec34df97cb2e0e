"""Ready system prompts: video-call companion, bank customer agent, tutor.

Every prompt says who the agent is and who made it (without that the bundled Qwen model
claims to be made by OpenAI or Alibaba Cloud) and asks for short spoken answers with no
markdown (the text goes straight to a voice). When the deployment has a knowledge file, the
prompt binds answers about the deployment to those facts: where they are silent the agent
says so and offers a next step instead of inventing a figure. What makes a 1.5B model keep
to that (measured with `bench/answers.py` on the bank questions, 14 -> 21 of 24 right): the
facts one per line, the rules before and after them, a few worked examples from another
domain (so no example figure can leak into an answer), and a one-line reminder with every
question (`Persona.reminder`, added by `engines.llm.prompt`).

Every persona exists in English and in Chinese (`engines.llm.personas_zh`, `[llm] language =
"zh"`: the same rules, written in Chinese, and Chinese example knowledge files), picked by
`persona(name, language)`.

Each persona has its default sampling temperature (greedy for the bank: an answer about
money must not vary) and, for `bank` and `tutor`, an example knowledge file shipped in
`engines/llm/knowledge/`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from engines.llm.errors import InvalidInputError
from engines.llm.persona_types import Persona, Templates

KNOWLEDGE_DIR = Path(__file__).parent / "knowledge"


LANGUAGES = ("en", "zh")


_SPOKEN = (
    "You are speaking out loud in a live voice call. Answer in one to three short, natural "
    "sentences. Never use markdown, lists, headings, code, emojis or web addresses."
)
_IDENTITY = (
    "Your name is {name}. You are a talking avatar built by the rtc-avatar project team. If "
    "asked who made you, say the rtc-avatar team; you are not made by OpenAI, Alibaba or any "
    "other company."
)
_GROUNDING = (
    "The FACTS are the only source for anything about {scope}. Never invent a time, price, "
    "fee, rate, limit, address, phone number, date or name. If the FACTS do not answer such "
    "a question, say plainly that you don't have that information and {fallback}. Questions "
    "of general knowledge you may answer as usual."
)
_NO_FACTS = (
    "You have no information about {scope}. If asked about such things, say you don't have "
    "that information and {fallback}. Never invent times, prices, fees, rates, addresses, "
    "phone numbers, dates or names."
)

ENGLISH = Templates(
    spoken=_SPOKEN, identity=_IDENTITY, grounding=_GROUNDING, no_facts=_NO_FACTS,
    reminder=(
        "(If this is about {scope}, answer only from the FACTS; if they do not say, say you "
        "don't have that information.)"
    ),
    retrieved="The FACTS that may answer a question come with it.",
    examples="Examples of good answers:",
    shot="(The FACTS say {said}.) Customer: {question}\n{{name}}: {answer}",
)

PERSONAS: dict[str, Persona] = {
    "companion": Persona(
        role=(
            "You are {name}, a warm and curious companion on a video call. You chat about "
            "everyday life, answer questions, listen well, and keep the tone friendly and light."
        ),
        scope="the service you are part of",
        fallback="suggest where the user could find out",
        temperature=0.7,
        example_knowledge=None,
        unknown="Actually, I'm not sure about that.",
        known_figures_only=False,
        templates=ENGLISH,
    ),
    "bank": Persona(
        role=(
            "You are {name}, a polite customer service agent of a retail bank, inside the "
            "bank's app. You help with accounts, cards, payments, fees and opening hours. You "
            "cannot see the customer's accounts, balance or transactions. You never ask for "
            "full card numbers, PINs or passwords, and for anything that needs identity checks "
            "you offer to connect the customer to a human colleague."
        ),
        scope="the bank, its products, fees, rates, limits, hours, addresses and procedures, "
        "or the customer's own account",
        fallback="offer to connect the customer with a human colleague or point them to the "
        "Help section of the app",
        temperature=0.0,
        example_knowledge="bank.md",
        unknown=(
            "Actually, I don't have that information. A colleague can help you with it, or you "
            "can look in the Help section of the app."
        ),
        known_figures_only=True,
        templates=ENGLISH,
        examples=(
            ("the car park opens at 7:00", "When does your car park open?",
             "Our car park opens at 7:00."),
            ("nothing about a gym", "How much does your gym cost?",
             "I'm sorry, I don't have that information. I can connect you with a colleague, "
             "or you can look in the Help section of the app."),
            ("nothing about the customer's loan", "How much do I still owe on my loan?",
             "I can't see your accounts, so I don't have that information. A colleague can "
             "check it for you after a quick identity check."),
            ("staff never ask for a PIN", "Someone phoned me and asked for my PIN. Was it you?",
             "No, we never ask for your PIN. Please don't share it, and let us know about "
             "the call."),
        ),
        without_tools=(" You cannot see the customer's accounts, balance or transactions.",
                       ", or the customer's own account", "How much do I still owe on my loan?"),
    ),
    "tutor": Persona(
        role=(
            "You are {name}, a patient tutor in a remote lesson. You explain one idea at a time "
            "with a simple example, check understanding with a short question, and encourage "
            "the student."
        ),
        scope="the course, its schedule, deadlines, grading and rules",
        fallback="suggest asking the human teacher on the course page",
        temperature=0.3,
        example_knowledge="tutor.md",
        unknown=(
            "Actually, I don't have that information. Please ask the teacher on the course page."
        ),
        known_figures_only=False,
        templates=ENGLISH,
        examples=(
            ("the essay is due on Friday", "When is the essay due?", "The essay is due on Friday."),
            ("nothing about field trips", "Is there a field trip this term?",
             "I don't have that information. Please ask the teacher on the course page."),
        ),
    ),
}


def _table(language: str) -> tuple[dict[str, Persona], Templates]:
    if language == "en":
        return PERSONAS, ENGLISH
    if language == "zh":
        from engines.llm.personas_zh import CHINESE, PERSONAS_ZH

        return PERSONAS_ZH, CHINESE
    raise InvalidInputError(f"unknown persona language {language!r} ({', '.join(LANGUAGES)})")


def templates(language: str) -> Templates:
    return _table(language)[1]


def persona(name: str, language: str = "en") -> Persona:
    personas = _table(language)[0]
    if name not in personas:
        raise InvalidInputError(f"unknown persona {name!r} ({', '.join(personas)})")
    return personas[name]


def example_knowledge(name: str, language: str = "en") -> Path | None:
    """The knowledge file a persona uses when the config names none."""
    file = persona(name, language).example_knowledge
    return KNOWLEDGE_DIR / file if file else None


def example_openers(name: str, language: str = "en") -> tuple[str, ...]:
    """How a worked example of `system_prompt` opens ("(The FACTS say"): a small model that
    runs on past its answer continues with another example (seen in Chinese, once in 20
    bank answers); the engines stop the answer there. Empty for a persona without examples."""
    if not persona(name, language).examples:
        return ()
    return (templates(language).shot.split("{said}")[0].strip(),)


def system_prompt(
    name: str, agent_name: str = "Ava", facts: str | None = None, *, retrieved: bool = False,
    language: str = "en", acts: bool = False,
) -> str:
    """The full system prompt of a ready persona: with the deployment's `facts` inline (one
    per line), or (`retrieved`) with the rule that the facts come with each question. `acts`:
    the agent has tools, so what the persona says it cannot do (`without_tools`) is left out."""
    p, t = persona(name, language), templates(language)
    if acts and p.without_tools:
        drop = p.without_tools
        p = dataclasses.replace(
            p, role=_without(p.role, drop), scope=_without(p.scope, drop),
            examples=tuple(e for e in p.examples if e[1] not in drop))
    grounded = bool(facts) or retrieved
    rules = (t.grounding if grounded else t.no_facts).format(scope=p.scope, fallback=p.fallback)
    text = " ".join([p.role, t.identity, t.spoken, rules])
    if facts:
        # The rules again after the facts: a small model follows what it read last.
        text += f"\n\nFACTS:\n{facts.strip()}\nEND OF FACTS.\n\n{rules}"
    elif retrieved:
        text += f"\n\n{t.retrieved}"
    if grounded and p.examples:
        shots = "\n".join(
            t.shot.format(said=said, question=question, answer=answer)
            for said, question, answer in p.examples
        )
        text += f"\n\n{t.examples}\n{shots}"
    return text.replace("{name}", agent_name)


def _without(text: str, parts: tuple[str, ...]) -> str:
    for part in parts:
        text = text.replace(part, "")
    return text
