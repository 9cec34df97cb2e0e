"""`[embed]`: what apps embedding the agent through the ecosystem's SDKs may do and send."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EmbedConfig:
    # Origins of pages served elsewhere that may call the API from a browser (CORS), e.g.
    # ["https://app.example.com"]; "*" allows any. Empty: only pages this server serves.
    cors_origins: tuple[str, ...] = ()
    # Serve pipecat-ai-small-webrtc-prebuilt's web client at /prebuilt/ (when installed).
    prebuilt: bool = False
    # RTVI messages from a client larger than this get an RTVI error and are dropped.
    max_message_bytes: int = 64 * 1024
    # Typed questions (RTVI send-text): at most this many at once...
    send_text_burst: int = 3
    # ...and then this many per second; more are refused with an RTVI error-response.
    send_text_per_s: float = 0.5
    # Longest typed question, in characters.
    max_text_chars: int = 2000
    # The app's `vocabulary` message (names this user may say, docs/embedding.md): at most
    # this many phrases of at most `max_vocabulary_chars` characters each.
    max_vocabulary: int = 200
    max_vocabulary_chars: int = 80
    # How long a session id from POST /start waits for its offer.
    start_ttl_s: float = 60.0

    def __post_init__(self) -> None:
        for origin in self.cors_origins:
            if origin != "*" and not origin.startswith(("http://", "https://")):
                raise ValueError(f"cors_origins: {origin!r} is not an origin (https://host)")
            if origin.endswith("/"):
                raise ValueError(f"cors_origins: {origin!r} must not end with '/'")
        if self.max_message_bytes < 1024 or self.max_text_chars < 1:
            raise ValueError("max_message_bytes must be >= 1024, max_text_chars >= 1")
        if self.max_vocabulary < 1 or self.max_vocabulary_chars < 1:
            raise ValueError("max_vocabulary and max_vocabulary_chars must be >= 1")
        if self.send_text_burst < 1 or self.send_text_per_s <= 0 or self.start_ttl_s <= 0:
            raise ValueError("send_text_burst >= 1, send_text_per_s and start_ttl_s > 0")
