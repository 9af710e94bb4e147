"""fetcher package."""
