"""trainstack: providers/runpod."""
