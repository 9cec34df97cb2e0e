"""tts engines."""
