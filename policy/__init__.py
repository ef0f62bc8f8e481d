"""trainstack: policy."""
