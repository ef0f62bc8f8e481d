"""trainstack: providers."""
