"""A click model over an embedding table 4x larger than warpvm's GPU cache, trained a few steps.

Each sample is a bag of ids (Zipf 1.2, hot rows scattered over the table) pooled by a
PagedEmbeddingBag whose table lives in pinned host memory behind warpvm's cache; a small MLP
predicts a click that depends on hidden per-row scores. backward steps the table in place
(fused SGD through warpvm.index_add) while Adam steps the MLP.

    python examples/python/embedding_bag.py                    # 256 MiB cache, 1 GiB table
    python examples/python/embedding_bag.py --cache 2GiB --ratio 16 --steps 200

Needs torch, a GPU and warpvm.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn.functional as F
import warpvm
from warpvm.bench_torch import batch_ids
from warpvm.torch import PagedEmbeddingBag


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="256MiB", help="warpvm's GPU cache (default 256MiB)")
    parser.add_argument("--ratio", type=float, default=4.0, help="table bytes / cache bytes (default 4)")
    parser.add_argument("--dim", type=int, default=64, help="embedding width, float32 (default 64)")
    parser.add_argument("--bags", type=int, default=4096, help="samples per step (default 4096)")
    parser.add_argument("--pooling", type=int, default=32, help="ids per sample (default 32)")
    parser.add_argument("--ids", default="zipf1.2", help="id distribution: uniform, zipf1.0, zipf1.2, ...")
    parser.add_argument("--steps", type=int, default=60, help="training steps (default 60)")
    parser.add_argument("--table-lr", type=float, default=0.05, help="the table's SGD rate (default 0.05)")
    parser.add_argument("--lr", type=float, default=0.003, help="the MLP's Adam rate (default 0.003)")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    device = torch.device("cuda", 0)
    torch.manual_seed(args.seed)
    with warpvm.Runtime(cache=args.cache) as rt:
        rows = int(rt.cache_bytes * args.ratio) // (args.dim * 4)
        start = time.perf_counter()
        table = PagedEmbeddingBag(rows, args.dim, runtime=rt, mode="sum", lr=args.table_lr, seed=args.seed)
        print(
            f"table: {rows:,} x {args.dim} float32 = {rows * args.dim * 4 / 2**30:.2f} GiB in warpvm, "
            f"cache {rt.cache_bytes / 2**30:.2f} GiB ({time.perf_counter() - start:.1f} s to fill)"
        )
        # The hidden truth: a score per row; a sample clicks when its ids' scores add up high.
        scores = torch.randn(rows, device=device)
        mlp = torch.nn.Sequential(torch.nn.Linear(args.dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(
            device
        )
        optimizer = torch.optim.Adam(mlp.parameters(), lr=args.lr)
        offsets = torch.arange(0, args.bags * args.pooling, args.pooling, device=device)
        losses = []
        start = time.perf_counter()
        for step in range(args.steps):
            ids_host = batch_ids(args.ids, rows, args.bags * args.pooling, seed=args.seed * 1_000_003 + step)
            ids = torch.from_numpy(ids_host).to(device, non_blocking=True)
            clicks = (scores[ids].view(args.bags, args.pooling).sum(1) > 0).float()
            logits = mlp(table(ids, offsets)).squeeze(1)
            loss = F.binary_cross_entropy_with_logits(logits, clicks)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # also steps the table: table[ids] -= table_lr x grad
            optimizer.step()
            losses.append(loss.item())
            if step % 10 == 0 or step == args.steps - 1:
                accuracy = ((logits > 0).float() == clicks).float().mean().item()
                print(f"step {step:4d}  loss {losses[-1]:.4f}  accuracy {accuracy:.3f}")
        seconds = time.perf_counter() - start
        stats = rt.stats()
    window = max(1, min(10, len(losses) // 3))
    first, last = sum(losses[:window]) / window, sum(losses[-window:]) / window
    ids_per_s = args.steps * args.bags * args.pooling / seconds
    print(
        f"{args.steps} steps in {seconds:.1f} s ({ids_per_s / 1e6:.1f} M ids/s); mean loss of the first "
        f"{window} steps {first:.4f}, of the last {window} {last:.4f}"
    )
    print(f"warpvm: {stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
