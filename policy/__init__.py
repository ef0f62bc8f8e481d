"""The Pulumi policy pack: each policy a plain function over the resource contract (docs/ARCHITECTURE.md),
its thresholds from policy config (policy/config/<stack>.json, checked by config_file.py), facts/ only."""
