"""face engines."""
