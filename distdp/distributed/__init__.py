"""Ray orchestration of the spectral fit: shard actors holding corpus rows, and the backend the coordinator calls."""
from distdp.distributed.backend import RayBackend, ShardActor, ensure_ray

__all__ = ["RayBackend", "ShardActor", "ensure_ray"]
