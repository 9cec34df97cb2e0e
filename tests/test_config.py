"""Config loading: defaults, TOML overlay, and clear errors for typos and wrong types."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from pathlib import Path

import pytest

from common.logs import LogfmtFormatter
from rtc_server.__main__ import main
from rtc_server.config import AgentConfig, Config, load_config
from rtc_server.dataconf import replace_path
from rtc_server.errors import ConfigError
from rtc_server.events import AgentText, StateChanged, TurnTimings, encode

REPO = Path(__file__).resolve().parents[1]


def test_defaults_need_no_file_and_name_no_public_stun_server() -> None:
    config = load_config(None)
    assert config == Config()
    assert config.server.host == "127.0.0.1" and config.server.port == 8080
    assert config.ice.servers == ()
    assert (config.media.width, config.media.height, config.media.fps) == (512, 512, 25)


def test_example_config_loads() -> None:
    config = load_config(REPO / "config.example.toml")
    assert config.ice.servers[0].urls[0].startswith("turn:")


def config_keys() -> list[tuple[str, str]]:
    """(section, key) for every option the loader accepts."""
    config = Config()
    return [(section.name, key.name) for section in dataclasses.fields(config)
            for key in dataclasses.fields(getattr(config, section.name))]


def test_every_option_is_in_the_example_with_its_default_and_in_the_reference() -> None:
    """The example lists each key (commented out where the default is none) at its default
    value, and the configuration reference (docs/configuration.md) names each one: an option
    nobody can find does not exist."""
    text = (REPO / "config.example.toml").read_text(encoding="utf-8")
    example = tomllib.loads(text)
    reference = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    reference_words = {w for span in re.findall(r"`([^`\n]+)`", reference)
                    for w in re.findall(r"\w+", span)}
    config = Config()
    missing, wrong, undocumented = [], [], []
    for section, key in config_keys():
        default = getattr(getattr(config, section), key)
        if key in example.get(section, {}):
            value = example[section][key]
            expected = list(default) if isinstance(default, tuple) else default
            if section != "ice" and expected != value:  # [ice] shows an example server
                wrong.append(f"{section}.{key} = {value!r}, default {default!r}")
        elif not re.search(rf"^# {key} = ", text, re.M):
            missing.append(f"{section}.{key}")
        if key not in reference_words:
            undocumented.append(f"{section}.{key}")
    assert not missing and not wrong and not undocumented, (missing, wrong, undocumented)


def test_toml_overlay_and_ice_servers(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[server]\nport = 9000\nmax_sessions = 2\n[media]\nfps = 30\n'
        '[[ice.servers]]\nurls = ["turn:turn.example.org:3478"]\nusername = "u"\ncredential = "p"\n'
    )
    config = load_config(path)
    assert config.server.port == 9000 and config.server.max_sessions == 2
    assert config.media.fps == 30 and config.media.width == 512
    assert config.ice.servers[0].as_dict() == {
        "urls": ["turn:turn.example.org:3478"], "username": "u", "credential": "p",
    }


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[server]\nprot = 1\n", "unknown key(s): prot"),
        ("[sever]\n", "unknown key(s): sever"),
        ('[server]\nport = "80"\n', "server.port: expected an integer"),
        ("[server]\nport = 70000\n", "out of range"),
        ('[server]\nmode = "karaoke"\n', "not one of"),
        ("[media]\nwidth = 511\n", "even"),
        ('[[ice.servers]]\nurls = ["http://x"]\n', "must start with stun:"),
        ("[vad]\naggressiveness = 7\n", "aggressiveness"),
        ('[vad]\nengine = "nope"\n', "unknown key(s): engine"),  # webrtcvad is the only one
        ("[agent]\nquiet_pauses = -1\n", "quiet_pauses must be >= 0"),
        ("not toml ===", "c.toml"),
    ],
)
def test_bad_config_gives_clear_error(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=None) as info:
        load_config(path)
    assert fragment in str(info.value)


def test_missing_file_and_cli_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    assert main(["--config", str(tmp_path / "nope.toml")]) == 2
    assert "config file not found" in capsys.readouterr().err


def test_replace_path_is_typed() -> None:
    config = replace_path(Config(), "server.port", 1234)
    assert config.server.port == 1234
    with pytest.raises(ConfigError):
        replace_path(Config(), "server.port", "x")
    with pytest.raises(ConfigError):
        replace_path(Config(), "server.nope", 1)


def test_event_envelope_schema() -> None:
    message = json.loads(encode(StateChanged(state="speaking"), session_id="s1", t=1.23456))
    assert message == {
        "v": 1, "type": "state", "session_id": "s1", "t": 1.2346, "state": "speaking",
    }
    timings = TurnTimings(turn_id=3, marks_ms={"asr_final": 12.5})
    message = json.loads(encode(timings, session_id="s", t=0))
    assert message["type"] == "timings" and message["marks_ms"] == {"asr_final": 12.5}
    message = json.loads(encode(AgentText(turn_id=1, text="Hi.", final=True), session_id="s", t=0))
    assert message["type"] == "agent_text" and message["final"] is True


def test_logfmt_lines_carry_extra_fields() -> None:
    import logging

    record = logging.LogRecord("x", logging.INFO, __file__, 1, "session %s", ("closed",), None)
    record.session_id = "abc"
    line = LogfmtFormatter().format(record)
    assert 'msg="session closed"' in line and "session_id=abc" in line and "level=info" in line


def test_session_logger_keeps_both_context_and_call_fields() -> None:
    """Regression: the stdlib LoggerAdapter dropped a call's `extra` (e.g. close reasons)."""
    import logging

    from common.logs import ContextLogger

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    base = logging.getLogger("test.context")
    base.addHandler(Keep())
    base.setLevel(logging.INFO)
    ContextLogger(base, {"session_id": "s1"}).info("closed", extra={"reason": "ice_failed"})
    fields = vars(records[0])  # the extras are attributes of the record
    assert fields["session_id"] == "s1" and fields["reason"] == "ice_failed"


def test_a_bad_knowledge_file_stops_the_server_at_start_up_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked before any model loads: the error names the file, exit code 2, no traceback."""
    missing = tmp_path / "facts.md"
    path = tmp_path / "c.toml"
    path.write_text(f'[llm]\npersona = "bank"\nknowledge = "{missing}"\n')
    assert main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "Traceback" not in err
    missing.write_bytes(b"\x00binary")
    assert main(["--config", str(path)]) == 2
    assert "binary" in capsys.readouterr().err


def test_asking_back_takes_only_its_placeholder_and_a_threshold_below_one() -> None:
    with pytest.raises(ValueError, match="clarify_topic"):
        AgentConfig(clarify_topic="Did you mean {thing}?")
    with pytest.raises(ValueError, match="unsure_below"):
        AgentConfig(unsure_below=1.0)
    assert AgentConfig(clarify_topic="Pardon?").clarify_topic == "Pardon?"  # no topic named
