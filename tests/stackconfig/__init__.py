"""Tests for stackconfig/."""
