"""Small helpers every part may use (the emulator and tests included): standard library only."""
