"""Tools the agent can call: declared per deployment, offered to the LLM in its chat
template's tool format, checked before anything runs.

- `spec.py`: the declarations (`ToolSet.load`: TOML or JSON, each tool's JSON-schema
  parameters checked at start-up) and the phrases the agent says around a call.
- `prompt.py`: the system prompt's tool block (Qwen2.5's own `<tools>` format) and the
  per-message reminder that says when to call one.
- `calls.py`: a call read out of the model's text, and the checks it must pass before it is
  run, read back or refused (declared, valid, its values said by the user).

Execution (the embedding app over RTVI, or an HTTP endpoint) is the server's
(`rtc_server/tool_runner.py`): engines never touch the network for a tool.
"""

from engines.tools.calls import ToolCall, Verdict, check_call, parse_call
from engines.tools.spec import ToolsError, ToolSet, ToolSpec

__all__ = ["ToolCall", "ToolSet", "ToolSpec", "ToolsError", "Verdict", "check_call", "parse_call"]
