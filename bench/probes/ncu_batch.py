#!/usr/bin/env python3
"""Probe for ncu: runs histeq.equalize on one (64, 1024, 1024) uint8 CUDA batch three times per
batched path named on the command line (histeq._set_batch_path), so that ncu can profile the
batch kernels of each path on the same data, e.g.

    ncu --cache-control none --kernel-name regex:batch --metrics gpu__time_duration.sum,... \\
        python3 bench/probes/ncu_batch.py cluster two_launch

(bench/results/h200/python/ncu_batch_threads*.txt). Needs torch with CUDA and the histeq package.
"""
import sys

import torch

import histeq

x = torch.randint(0, 200, (64, 1024, 1024), dtype=torch.uint8, device="cuda")
for path in sys.argv[1:]:
    histeq._set_batch_path(path)
    for _ in range(3):
        y = histeq.equalize(x)
torch.cuda.synchronize()
