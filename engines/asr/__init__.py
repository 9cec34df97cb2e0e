"""asr engines."""
