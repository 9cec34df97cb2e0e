"""Prometheus metrics of one server, in its own registry (no process-global state)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.sessions_active = Gauge(
            "rtc_sessions_active", "Sessions currently open", registry=self.registry
        )
        self.sessions_total = Counter(
            "rtc_sessions", "Sessions created", registry=self.registry
        )
        self.video_frames_sent = Counter(
            "rtc_video_frames_sent", "Video frames handed to the encoder", registry=self.registry
        )
        self.audio_packets_sent = Counter(
            "rtc_audio_packets_sent", "20 ms audio packets handed to the encoder",
            registry=self.registry,
        )
        self.session_errors = Counter(
            "rtc_session_errors", "Sessions ended or degraded by an error", ["reason"],
            registry=self.registry,
        )

        self.barge_ins = Counter(
            "rtc_barge_ins", "Agent speech paused or stopped by the user", registry=self.registry
        )
        self.quiet_interruptions = Counter(
            "rtc_quiet_interruptions",
            "Speech over an answer too far below the user's level to interrupt it",
            registry=self.registry,
        )
        self.false_interruptions = Counter(
            "rtc_false_interruptions", "Barge-ins that were not (the answer resumed)",
            registry=self.registry,
        )
        self.unsure_turns = Counter(
            "rtc_unsure_turns", "Questions the ASR was unsure of, asked back",
            registry=self.registry,
        )
        self.tool_calls = Counter(
            "rtc_tool_calls", "Tool calls by tool and outcome (done, failed, timeout, "
            "cancelled, refused, asked)", ["tool", "outcome"], registry=self.registry,
        )
        self.tool_call_seconds = Histogram(
            "rtc_tool_call_seconds", "A tool's run, from the request to its result", ["tool"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30), registry=self.registry,
        )
        self.barge_in_ms = Histogram(
            "rtc_barge_in_ms", "User speech onset to agent audio cleared, ms",
            buckets=(100, 150, 200, 250, 300, 400, 500, 750, 1000, 2000),
            registry=self.registry,
        )
        self.turn_stage_ms = Histogram(
            "rtc_turn_stage_ms",
            "Per-stage latency of agent turns, ms after the end of the user's speech",
            ["stage"],
            buckets=(50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 10000),
            registry=self.registry,
        )

        self.turn_stall_ms = Histogram(
            "rtc_turn_stall_ms",
            "Silence inside agent answers where the next chunk was not ready, ms per turn",
            buckets=(0, 20, 50, 100, 200, 500, 1000, 2000),
            registry=self.registry,
        )

    def observe_turn(self, marks_ms: dict[str, float]) -> None:
        """Record a turn's stage marks (only stages after the end of speech)."""
        for stage, ms in marks_ms.items():
            if ms >= 0 and stage not in ("speech_end", "voice_end"):
                self.turn_stage_ms.labels(stage=stage).observe(ms)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
