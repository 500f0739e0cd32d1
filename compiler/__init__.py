"""Chat-template compiler: templates → reviewed format specs → standalone parsers."""

__version__ = "0.1.0"
