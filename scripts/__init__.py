"""trainstack helper scripts that are Python modules (run as `python -m scripts.<name>`)."""
