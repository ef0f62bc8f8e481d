"""trainstack: emulator."""
