"""The root of trainstack's exceptions, low enough for every part to raise from (standard library only).

The tree is drawn in `providers/errors.py`, which re-exports these two and shows them as their message inside
Pulumi's provider host.
"""

from __future__ import annotations


class TrainstackError(Exception):
    """Root of every error trainstack raises on purpose; the message says what to do next."""


class SettingsError(TrainstackError):
    """An environment knob is malformed; the message names the variable and a valid value."""
