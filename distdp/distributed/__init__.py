"""Ray as a transport: shard actors hosting the shard class they are given, and the backend the coordinators call.

:mod:`~distdp.distributed.backend` (corpus shards for the LDA fits), :mod:`~distdp.distributed.stream`
(point shards for the tensor power methods), :mod:`~distdp.distributed.completion` (tensor-completion runs
as Ray tasks). Nothing here imports the LDA code.
"""
from distdp.distributed.backend import RayBackend, ShardActor, ensure_ray

__all__ = ["RayBackend", "ShardActor", "ensure_ray"]
