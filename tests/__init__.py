"""trainstack: tests."""
