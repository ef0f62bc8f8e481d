"""Tests for the policy pack (policy/)."""
