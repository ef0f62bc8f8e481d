"""The S3 checkpoint bucket as a dynamic resource (boto3), in the same shape as providers/runpod/."""
