"""Benchmarks; each ends by printing one JSON line of its figures. Never run by the tests."""
