"""llm engines."""
