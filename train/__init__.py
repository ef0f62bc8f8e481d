"""What runs on the nodes: the training jobs (train.py, gpt_train.py), the node tools (train/node/: health
gate, preflight, metrics agent, checkpoint transfer) and the run's monitor (train/monitor/)."""
