"""Tests for the protocol package."""
