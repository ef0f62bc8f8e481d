"""Delivery of rendered node artifacts over SSH (a dynamic provider; pulumi-command cannot be built here)."""
