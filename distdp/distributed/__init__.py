"""Ray orchestration: the only package that imports ray."""
from distdp.distributed.backend import RayBackend, ShardActor, ensure_ray

__all__ = ["RayBackend", "ShardActor", "ensure_ray"]
