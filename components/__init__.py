"""trainstack: components."""
