#!/usr/bin/env python3
"""Equalize many image files over a Dask cluster: the list of files is cut into chunks and each
chunk runs histeq.equalize_files on one worker (one worker per GPU).

    python examples/dask_equalize.py OUT_DIR FILE... [--chunk 64] [--backend auto|cuda|cpu]
        [--scheduler ADDRESS] [--workers N] [--processes/--threads]

Cluster: --scheduler ADDRESS joins a running cluster (dask-jobqueue, Kubernetes, `dask
scheduler` + `dask worker`: docs/scaling.md); otherwise a local one is started: dask-cuda's
LocalCUDACluster (one worker process per visible GPU, each pinned to its GPU with
CUDA_VISIBLE_DEVICES) where dask-cuda is installed and a GPU is usable, else dask.distributed's
LocalCluster (--workers processes, one thread each: histeq's CPU backend already spreads one
image over every core, so more threads per worker do not help).

Prints one line per file and a summary; exit status 1 when a file failed (every other file is
written: equalize_files reports a failed file instead of raising). The function
`equalize_on_cluster` is what the test calls.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence


def chunks(items: Sequence[str], size: int) -> List[List[str]]:
    """items cut into consecutive lists of at most `size`."""
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def _equalize_chunk(files: List[str], out_dir: str, options: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Runs on a worker: histeq is imported there (the workers need the package installed)."""
    import histeq
    return histeq.equalize_files(files, out_dir, **options)


def make_cluster(workers: Optional[int] = None, processes: bool = True, backend: str = "auto"):
    """A local cluster: LocalCUDACluster when dask-cuda is installed and a GPU is usable (and the
    backend is not 'cpu'), else a LocalCluster of `workers` single-thread processes."""
    if backend != "cpu":
        try:
            from dask_cuda import LocalCUDACluster
            import histeq
            if histeq.cuda_available():
                return LocalCUDACluster(threads_per_worker=1)
        except ImportError:
            pass
    from dask.distributed import LocalCluster
    n = workers or min(4, os.cpu_count() or 1)
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=processes,
                        dashboard_address=None)


def equalize_on_cluster(client, files: Sequence[str], out_dir: str, chunk: int = 64,
                        **options: Any) -> List[Dict[str, Any]]:
    """Submits one task per chunk to `client` (a dask.distributed.Client), gathers the reports
    (histeq.equalize_files' dicts; a failed file has ok=False and its error) in input order.
    `options` go to equalize_files; with errors="raise" a chunk with a failed file raises its
    RuntimeError here after the other chunks have finished."""
    from dask.distributed import wait
    futures = [client.submit(_equalize_chunk, c, out_dir, options, pure=False)
               for c in chunks(list(files), chunk)]
    wait(futures)
    reports: List[Dict[str, Any]] = []
    for f in futures:
        reports.extend(f.result())
    return reports


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--chunk", type=int, default=64, help="files per task (default 64)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--mode", choices=["luma", "rgb", "gray"])
    ap.add_argument("--scheduler", help="address of a running scheduler (tcp://host:8786)")
    ap.add_argument("--workers", type=int, help="local cluster: worker processes")
    ap.add_argument("--threads", action="store_true",
                    help="local cluster: threads in this process instead of processes")
    args = ap.parse_args(argv)

    from dask.distributed import Client
    t0 = time.perf_counter()
    cluster = None
    if args.scheduler:
        client = Client(args.scheduler)
    else:
        cluster = make_cluster(args.workers, not args.threads, args.backend)
        client = Client(cluster)
    try:
        reports = equalize_on_cluster(client, args.files, args.out_dir, args.chunk,
                                      backend=args.backend, mode=args.mode)
    except Exception as e:  # noqa: BLE001 — report and exit 1, as the CLI does
        print(f"dask_equalize: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    failed = 0
    for r in reports:
        if not r["ok"]:
            failed += 1
            print(f"dask_equalize: {r['error']}", file=sys.stderr)
            continue
        print(f"{r['output']}: {r['width']}x{r['height']}, {r['channels']} channel(s), "
              f"mode {r['mode']}, kernel {r['kernel']} on {r['device']}")
    print(f"{len(reports)} files in {time.perf_counter() - t0:.2f} s, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
