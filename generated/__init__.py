"""Generated chat-format parsers: one format module per template, all running on
one runtime (_runtime.py)."""
