"""What runs on the nodes: the training job (train.py) and the node tools (train/node/)."""
