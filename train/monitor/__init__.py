"""The run's watch loop: alert rules, the aggregator node 0 runs beside training, and its notifications."""
