"""Ray job entrypoint for DP tensor completion.

    ray job submit --address http://HEAD:8265 --working-dir . -- \
        python jobs/complete.py ratings.parquet --rank 3 --perturbation gradient --epsilon 1 --out /shared/fit

The arguments are those of ``distdp complete``. For repeated runs and ε
sweeps as Ray tasks use :mod:`distdp.distributed.completion` (or
``benchmarks/completion_figures.py``).
"""
import sys

from distdp.cli import main

if __name__ == "__main__":
    sys.exit(main(["complete", *sys.argv[1:]]))
