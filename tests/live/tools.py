"""What the live run asks every corpus format for: the conversation and the tools
(typed arguments: string, integer, boolean, enum, a nested object, an array). No
torch here: the default suite checks the grammars on these tools too
(tests/test_export_agreement.py).

The schemas bound their strings, arrays and integers as a careful tool author would:
the grammars hold a value to them (compiler/runtime/schema_gbnf.py), so a small model
cannot loop inside a value the schema refuses (a hundred digits, endless strings), and
the run checks that a grammar refuses what its schema refuses. A value that is a
format's raw text up to a closer is counted too, in the GBNF and Lark grammar, not in
the structural tag (docs/exports.md)."""

from __future__ import annotations

USER = (
    "Book a table at Luigi's for 4 people at 19:30, outside, under the name Ada "
    "(phone 555-0100). We need a high chair."
)
SYSTEM = "You are a helpful assistant. Answer by calling one of the tools."

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_table",
            "description": "Book a table at a restaurant.",
            "parameters": {
                "type": "object",
                "properties": {
                    "restaurant": {
                        "type": "string",
                        "maxLength": 40,
                        "description": "The restaurant's name.",
                    },
                    "guests": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 20,
                        "description": "How many people.",
                    },
                    "outdoor": {"type": "boolean", "description": "A table outside."},
                    "time": {"type": "string", "enum": ["18:00", "19:30", "21:00"]},
                    "contact": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "maxLength": 40},
                            "phone": {"type": "string", "maxLength": 20},
                        },
                        "required": ["name"],
                        "additionalProperties": False,
                    },
                    "requests": {
                        "type": "array",
                        "items": {"type": "string", "maxLength": 40},
                        "maxItems": 3,
                        "description": "Special requests.",
                    },
                },
                "required": ["restaurant", "guests", "time"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 40},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
]
SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}
