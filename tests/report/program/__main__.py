"""Report-check program: a volume, a secret and either an Instant Cluster or N pods, sized by stack config."""

import pulumi
from fake import InstantCluster, NetworkVolume, Pod, Secret

cfg = pulumi.Config()
nodes = cfg.get_int("nodes") or 1
topology = cfg.get("topology") or "cluster"
run_hours = cfg.get_float("max_run_hours") or 24
dc = cfg.get("data_center") or "US-TX-3"
training = {"checkpoint_bucket": "ckpt", "checkpoint_interval_s": 900, "max_run_hours": run_hours}

volume = NetworkVolume(
    "data",
    {
        "name": "data",
        "size_gb": cfg.get_int("volume_gb") or 2000,
        "data_center_id": dc,
        "volume_type": "HIGH_PERFORMANCE",
    },
)
token = Secret(
    "hf-token", {"name": "HF_TOKEN", "value": cfg.require_secret("hf_token"), "description": "Hugging Face"}
)
env = {"HF_TOKEN": "{{ RUNPOD_SECRET_HF_TOKEN }}", "NUM_NODES": str(nodes), "TRAINING_JOB": "main"}
if topology == "cluster":
    InstantCluster(
        "train",
        {
            "name": "train",
            "cluster_type": "TRAINING",
            "gpu_type_id": "NVIDIA H100 80GB HBM3",
            "gpu_count_per_pod": 8,
            "pod_count": nodes,
            "image": cfg.get("image") or "trainstack/train:1",
            "env": env,
            "container_disk_gb": 100,
            "data_center_id": dc,
            "volume_id": volume.id,
            "volume_mount_path": "/workspace",
            "start_ssh": True,
            "training": training,
        },
    )
else:
    for i in range(nodes):
        Pod(
            f"node-{i}",
            {
                "name": f"node-{i}",
                "image": cfg.get("image") or "trainstack/train:1",
                "gpu_type_id": "NVIDIA H100 80GB HBM3",
                "gpu_count": 8,
                "cloud": "SECURE",
                "data_center_ids": [dc],
                "capacity": "on_demand",
                "env": {**env, "NUM_NODES": "1"},
                "container_disk_gb": 100,
                "min_cuda_version": "12.4",
                "training": training,
            },
        )
pulumi.export("nodes", nodes)
