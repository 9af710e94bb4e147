"""quorum package."""
