"""export package."""
