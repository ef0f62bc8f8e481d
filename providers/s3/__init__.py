"""trainstack: providers/s3."""
