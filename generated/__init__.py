"""Generated chat-format parsers: one standalone module per template."""
