"""The tools in the system prompt, in the format the model was trained on.

Qwen2.5's chat template, given tools, appends a `# Tools` block with one JSON declaration per
line to the system prompt; the block here is that text exactly (its `{{...}}` quirk
included), so every engine (llama.cpp, transformers, an OpenAI-compatible server) reads the
same prompt whatever it does with a `tools` argument, and the prompt stays one cached prefix.

Before the block, a short paragraph says when to call: the personas were written for an agent
that cannot see accounts ("I can't see your accounts"), and a 1.5B model follows that over a
bare tool list (measured: 5 of 8 requests called with the paragraph and the reminder, 0 of 8
without; bench/RESULTS.md, tools).

The tools' line ends the per-message reminder, after the persona's facts rule ("if the FACTS
do not say, say you don't have that information"): the 1.5B follows what it read last, and
with the facts rule last it answered most lookups of the customer's own data ("Am I
overdrawn?", "What did I last buy?") with "I don't have that information". Tools' line last
(bench/RESULTS.md, tools): written, the benchmark's 17 -> 19 of 20 right and a second set's
10 -> 14 of 17; spoken, 45 -> 50 of 60; the price, how-to questions answered with a
read-only lookup or asked back (a made-up value is dropped by the check): 0 -> 2 asks of the
benchmark's 10, 0 -> 3 lookups and 2 asks of the second set's 20. Nothing runs without a yes.
Since then a how-to question, or thanks, gets no call whatever the model writes
(engines/text/requests.py, checked in engines/tools/calls.py).
"""

from __future__ import annotations

import json

from engines.tools.spec import ToolSet

INTRO = {
    "en": ("ACTIONS: you can also act for the customer with the tools below. The app runs them "
           "in the customer's own signed-in session, so through them you can see and change "
           "their accounts. When the customer asks for something a tool does or looks up, "
           "answer with the tool call only. Never call a tool for a question about how something "
           "works, and never make up a value the customer did not say."),
    "zh": ("操作：你还可以用下面的工具为客户办事。应用会在客户自己已登录的会话中执行它们，"
           "所以通过它们你可以查看和更改客户的账户。客户要你做某个工具能做的事时，"
           "只回答工具调用。客户只是问某件事怎么做时不要调用工具，"
           "也不要编造客户没说过的值。"),
}
REMINDER = {"en": "(If a tool does or looks up what the customer asks for, call it.)",
            "zh": "（客户要的事工具能做或能查时，调用工具。）"}


def tools_block(tools: ToolSet, language: str = "en") -> str:
    """What follows the persona's system prompt when `tools` are declared."""
    declarations = "".join("\n" + json.dumps(t.schema(), ensure_ascii=False)
                           for t in tools.tools)
    return (
        f"\n\n{INTRO.get(language, INTRO['en'])}"
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
        f"{declarations}\n</tools>\n\nFor each function call, return a json object with "
        "function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
    )


def reminder(persona_reminder: str | None, language: str = "en") -> str:
    """The per-message reminder with the tools' line last (read last, followed most)."""
    line = REMINDER.get(language, REMINDER["en"])
    return f"{persona_reminder} {line}" if persona_reminder else line
