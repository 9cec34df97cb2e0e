"""vad engines."""
