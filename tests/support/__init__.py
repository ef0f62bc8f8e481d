"""Helpers shared by trainstack's tests."""
