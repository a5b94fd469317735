"""``ray job submit ... -- python jobs/decompose.py INPUT --k K --out DIR [...]``.

Same arguments as ``distdp decompose``; with ``--backend ray`` the points are
held by shard actors of the cluster the job runs on.
"""
import sys

from distdp.cli import main

if __name__ == "__main__":
    sys.exit(main(["decompose", *sys.argv[1:]]))
