"""Ray job entrypoint for the spectral LDA fit.

    ray job submit --address http://HEAD:8265 --working-dir . -- \
        python jobs/fit_lda.py s3://bucket/corpus --k 20 --out /shared/model

Inside a Ray job, ``ray.init()`` attaches to the job's cluster, so no
``--address`` is needed; the arguments are those of ``distdp fit-lda``.
"""
import sys

from distdp.cli import main

if __name__ == "__main__":
    sys.exit(main(["fit-lda", *sys.argv[1:]]))
