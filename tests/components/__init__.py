"""Tests for components/."""
