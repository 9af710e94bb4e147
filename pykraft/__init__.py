"""pykraft: the composition root — CLI, configuration and the local dev cluster."""

__version__ = "0.1.0"
