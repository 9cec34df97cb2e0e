"""bench/cluster.py's pure pieces (in testkit): the workers' TOML (a profile under the bench's
keys), the sessions' split over client processes, the round schedule and the merge of their
results, the per-stage marks, and the utilisation parsers and rows."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from rtc_server.config_toml import merged_toml
from testkit.conversation import Schedule, merge, split
from testkit.marks import (
    END_OF_TURN,
    end_bound,
    end_of_turn_ms,
    hearing_note,
    slow_ends,
    slowest_steps,
    stage_steps,
    stage_values,
)
from testkit.utilisation import (
    CLOCK_TICKS,
    CpuTimes,
    cpu_share,
    parse_gpu_line,
    parse_proc_stat,
    parse_process_stat,
    summary_rows,
)

REPO = Path(__file__).resolve().parents[1]


def test_the_gpu_profile_goes_under_the_bench_keys() -> None:
    """As bench/cluster.py's workers: the profile's [server] max_sessions = 16 loses to the
    bench's capacity, its [llm] and [face] stay, the bench's [llm]/[asr] keys are added."""
    profile = REPO / "config/gpu.toml"
    config = tomllib.loads(merged_toml({
        "server": {"mode": "agent", "max_sessions": 10, "log_level": "WARNING"},
        "ice": {"loopback_only": True}, "media": {"width": 512, "height": 512, "fps": 25},
        "llm": {"seed": 1234, "model": "/m/qwen", "forced_answers": "/x/answers.json"},
        "asr": {"model": "base"},
    }, profile))
    assert config["server"] == {"mode": "agent", "max_sessions": 10, "log_level": "WARNING"}
    assert config["llm"]["engine"] == "transformers" and config["llm"]["device"] == "cuda"
    assert config["llm"]["model"] == "/m/qwen" and config["llm"]["seed"] == 1234
    assert config["asr"] == {**tomllib.loads(profile.read_text())["asr"], "model": "base"}
    assert config["face"]["device"] == "cuda" and config["media"]["width"] == 512


def test_without_a_profile_only_the_given_keys(tmp_path: Path) -> None:
    config = tomllib.loads(merged_toml({"server": {"mode": "echo", "max_sessions": 4},
                                        "llm": {"temperature": 0.0}, "agent": {}}))
    assert config == {"server": {"mode": "echo", "max_sessions": 4},
                      "llm": {"temperature": 0.0}, "agent": {}}
    lists = tmp_path / "lists.toml"
    lists.write_text('[relay]\nurls = ["turn:127.0.0.1:3478"]\n')
    assert tomllib.loads(merged_toml({"relay": {"secret": "s"}}, lists)) == {
        "relay": {"urls": ["turn:127.0.0.1:3478"], "secret": "s"}}
    nested = tmp_path / "nested.toml"
    nested.write_text("[a.b]\nc = 1\n")
    with pytest.raises(ValueError, match="not a table of plain values"):
        merged_toml({}, nested)


@pytest.mark.parametrize(("sessions", "processes", "expected"), [
    (16, 4, [(0, 4), (4, 4), (8, 4), (12, 4)]),
    (5, 2, [(0, 3), (3, 2)]),
    (2, 4, [(0, 1), (1, 1)]),  # never a process without a session
    (3, 1, [(0, 3)]),
])
def test_sessions_split_over_client_processes(
        sessions: int, processes: int, expected: list[tuple[int, int]]) -> None:
    assert split(sessions, processes) == expected


def test_the_round_schedule() -> None:
    schedule = Schedule(t0=1000.0, together=True, round_s=20.0)
    assert [schedule.start_of(k) for k in range(3)] == [1000.0, 1020.0, 1040.0]


def test_client_results_merge_in_session_order() -> None:
    a = {"answers": [{"session": 2, "round": 1}, {"session": 2, "round": 0}],
         "sessions": [{"session": 2}]}
    b = {"answers": [{"session": 0, "round": 0}], "sessions": [{"session": 0}]}
    merged = merge([a, b])
    assert [(x["session"], x["round"]) for x in merged["answers"]] == [(0, 0), (2, 0), (2, 1)]
    assert [s["session"] for s in merged["sessions"]] == [0, 2]


def test_stage_rows_show_the_end_of_turn_and_each_stage() -> None:
    marks = [{"voice_end": -400.0, "turn_asked": -100.0, "asr_final": 50.0,
              "first_audio_sent": 300.0},
             {"voice_end": -600.0, "turn_asked": -200.0, "asr_final": 70.0,
              "first_audio_sent": 500.0}]
    assert end_of_turn_ms(marks) == [400.0, 600.0]
    values = dict(stage_values(marks))
    assert list(values)[:2] == [END_OF_TURN, "  turn_asked (ms after the end of the voice)"]
    assert values["  turn_asked (ms after the end of the voice)"] == [300.0, 400.0]
    assert "  pause (ms after the end of the voice)" not in values  # not sent: no row
    assert values["asr_final (ms after endpoint)"] == [50.0, 70.0]
    assert values["llm_first_token (ms after endpoint)"] == []  # none had it: a NaN row


PROC_STAT = """cpu  100 10 50 800 40 0 5 0 0 0
cpu0 50 5 25 400 20 0 3 0 0 0
cpu1 50 5 25 400 20 0 2 0 0 0
intr 1 2 3
ctxt 99
"""


def test_proc_stat_busy_share_of_all_cores() -> None:
    before = parse_proc_stat(PROC_STAT)
    assert before == CpuTimes(busy=165, total=1005, cores=2)
    after = CpuTimes(busy=165 + 150, total=1005 + 200, cores=2)
    assert cpu_share(before, after) == pytest.approx(75.0)
    assert cpu_share(before, before) != cpu_share(before, before)  # NaN: no time passed


def test_process_stat_counts_user_and_system_time() -> None:
    line = ("4242 (python -m (x)) S 1 4242 4242 0 -1 4194304 98 0 0 0 "
            f"{3 * CLOCK_TICKS} {2 * CLOCK_TICKS} 7 7 20 0 9 0 2254160 3133440 393")
    assert parse_process_stat(line) == pytest.approx(5.0)  # children's times not counted


@pytest.mark.parametrize(("line", "expected"), [
    ("0, 35, 12345\n", (0, 35.0, 12345.0)),
    ("3, 100, 80000", (3, 100.0, 80000.0)),
    ("0, [N/A], 12345", None),
    ("NVIDIA-SMI has failed because it couldn't communicate with the driver.", None),
    ("", None),
])
def test_nvidia_smi_lines(line: str, expected: tuple[int, float, float] | None) -> None:
    assert parse_gpu_line(line) == expected


def test_utilisation_rows_say_when_there_is_no_gpu() -> None:
    summary = {"cores": 16, "wall_s": 60.0, "cpu_pct": {"p50": 50.0, "max": 75.0},
               "processes": {"worker0": {"p50": 1.0, "max": 1.5, "mean": 0.9}}, "gpu": None}
    rows = summary_rows(summary)
    assert rows[0][1:] == ("50 (8.0)", "75 (12.0)")
    assert rows[1] == ("worker0, cores (mean 0.90)", "1.00", "1.50")
    assert rows[-1][:2] == ("GPU", "no GPU (no nvidia-smi)")
    summary["gpu"] = {"0": {"util_pct": {"p50": 40.0, "max": 90.0},
                            "mem_mib": {"p50": 2000.0, "max": 2100.0}}}
    assert summary_rows(summary)[-2:] == [("GPU 0 SM utilisation, %", "40", "90"),
                                              ("GPU 0 memory used, MiB", "2000", "2100")]


def test_a_turns_steps_each_from_the_mark_before() -> None:
    marks = {"voice_end": -250.0, "decode_start": -170.0, "pause_text": -40.0,
             "llm_first_token": -60.0, "first_chunk": -20.0, "tts_start": 30.0,
             "tts_first_audio": 70.0, "first_audio_sent": 120.0}
    steps = stage_steps(marks)
    assert steps["end of turn (after the voice)"] == 250.0
    assert steps["pause decode begins (after the voice)"] == 80.0
    assert steps["pause decode (to its transcript)"] == 130.0
    assert steps["LLM first token (after the endpoint)"] == -60.0  # started before it
    assert steps["speech queue (chunk -> TTS starts)"] == 50.0
    assert "face first frame (after the audio)" not in steps  # no face mark: no step


def test_the_slowest_tenth_against_the_rest() -> None:
    fast = {"voice_end": -200.0, "first_chunk": 10.0, "tts_start": 15.0}
    slow = {"voice_end": -210.0, "first_chunk": 10.0, "tts_start": 190.0}
    answers = [(500.0 + i, fast) for i in range(18)] + [(900.0, slow), (950.0, slow)]
    threshold, n, rows = slowest_steps(answers)
    assert (threshold, n) == (900.0, 2)
    table = {name: (a, b) for name, a, b in rows}
    assert table["speech queue (chunk -> TTS starts)"] == (180.0, 5.0)
    assert table["end of turn (after the voice)"] == (210.0, 200.0)
    assert slowest_steps([])[1:] == (0, [])


def test_a_turn_s_hearing_note_says_what_held_it_and_on_what_evidence() -> None:
    """The latest hearing mark before the endpoint is what the end of turn waited for (the
    long limit where the verdict asked for no silence); the note adds the verdict's
    evidence as the `timings` event carries it."""
    marks = {"voice_end": -412.0, "turn_model": -210.0, "pause_text": -205.0,
             "text_end": -96.0, "turn_asked": -180.0, "speech_end": 0.0}
    assert end_bound(marks) == "text_end"
    assert hearing_note(marks, {"turn": 0.9, "end": 0.75, "text_end": 0.97,
                                "text_end_ahead": 0.0}) == (
        "end of turn 412 ms (text_end; turn 0.9 end 0.75 text_end 0.97 text_end_ahead 0)")
    limit = {"voice_end": -1500.0, "turn_model": -1290.0, "pause_text": -1280.0}
    assert hearing_note(limit, {}) == "end of turn 1500 ms (limit)"
    assert end_bound({"voice_end": -90.0, "early_end": -2.0, "turn_asked": -1.0}) == "early_end"
    assert hearing_note({"speech_end": 0.0}, {"turn": 0.5}) == "no end of turn"


def test_slow_ends_are_the_turns_over_the_bound_slowest_first() -> None:
    answers: list[dict[str, dict[str, float]]] = [
        {"marks_ms": {"voice_end": -250.0}}, {"marks_ms": {"voice_end": -1200.0}},
        {"marks_ms": {}}, {"marks_ms": {"voice_end": -480.0}}]
    assert slow_ends(answers) == [answers[1], answers[3]]
    assert slow_ends(answers, over_ms=1200.0) == []
