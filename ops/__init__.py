"""Operator tools behind scripts/: local account and demo setup, orphans, pending deletes."""
