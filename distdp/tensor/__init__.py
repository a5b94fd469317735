"""Tensor power methods (Wang & Anandkumar 2016): robust (Alg. 1), simultaneous,
online/streaming (Alg. 2) and differentially private (Alg. 3).

The math modules (forms, power, online, dp, synthetic) import neither Ray nor
IO; :mod:`distdp.tensor.files` holds the parquet/.npy readers and the
``decompose`` entry point, and the Ray shard actors live in
:mod:`distdp.distributed.stream`.
"""
from distdp.tensor.dp import PrivacyReport, private_power_method
from distdp.tensor.forms import (deflation_apply, deflation_value, empirical_moment, moment_apply,
                                 moment_partial, moment_value, rank_one_sum, symmetrize, tensor_apply,
                                 tensor_value)
from distdp.tensor.online import ArrayStream, GeneratorStream, ShardedStream, online_power_method
from distdp.tensor.power import (EmpiricalMoment, ExplicitTensor, PowerResult, TensorOperator, as_operator,
                                 default_n_iters, default_n_restarts, robust_power_method,
                                 simultaneous_power_method)

__all__ = [
    "tensor_apply", "tensor_value", "moment_apply", "moment_value", "moment_partial", "deflation_apply",
    "deflation_value", "rank_one_sum", "symmetrize", "empirical_moment",
    "TensorOperator", "ExplicitTensor", "EmpiricalMoment", "as_operator", "PowerResult",
    "robust_power_method", "simultaneous_power_method", "default_n_restarts", "default_n_iters",
    "online_power_method", "ArrayStream", "GeneratorStream", "ShardedStream",
    "private_power_method", "PrivacyReport",
]
