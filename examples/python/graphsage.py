"""GraphSAGE minibatch training whose node features live in warpvm, 4x larger than its GPU cache.

A power-law (R-MAT) graph is generated on the GPU; its node features go into pinned host memory
as a warpvm PagedArray behind a PagedFeatureStore, and PyG's NeighborLoader((feature_store,
graph_store), ...) feeds a GraphSAGE model, the training loop otherwise unchanged. The same model
is then trained from PyG's CPU-feature loader (Data(x=CPU features)) with the same seed, and the
two loss curves are printed side by side. Every batch's features are checked against the host's.

    python examples/python/graphsage.py                      # 256 MiB cache, 1 GiB of features
    python examples/python/graphsage.py --cache 1GiB --ratio 8 --steps 50

Needs torch, torch_geometric, a GPU and warpvm. Batches are drawn by NeighborLoader where PyG can
sample (pyg-lib or torch-sparse), else by warpvm.sample_neighbors (--sampler chooses).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch
import warpvm
from warpvm.torch import graphsage, host_tensor


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="256MiB", help="warpvm's GPU cache (default 256MiB)")
    parser.add_argument("--ratio", type=float, default=4.0, help="feature bytes / cache bytes (default 4)")
    parser.add_argument("--dim", type=int, default=128, help="features per node, float32 (default 128)")
    parser.add_argument("--edge-factor", type=int, default=8, help="edges drawn per node (default 8)")
    parser.add_argument("--classes", type=int, default=16, help="node classes (default 16)")
    parser.add_argument("--hidden", type=int, default=128, help="hidden channels (default 128)")
    parser.add_argument("--fanout", default="10,10", help="neighbours per layer (default 10,10)")
    parser.add_argument("--batch-size", type=int, default=1024, help="seed nodes per batch (default 1024)")
    parser.add_argument(
        "--steps", type=int, default=20, help="training steps per loader (default 20, at least 3)"
    )
    parser.add_argument("--lr", type=float, default=0.003, help="Adam's learning rate (default 0.003)")
    parser.add_argument(
        "--sampler",
        choices=graphsage.SAMPLERS,
        help="pyg: NeighborLoader's (pyg-lib or torch-sparse); warpvm: warpvm.sample_neighbors on the GPU "
        "(default: pyg where PyG can sample, else warpvm)",
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.steps < 3:
        parser.error("--steps: at least 3 (the first two warm up)")
    return args


def main() -> int:
    args = parse_args()
    device = torch.device("cuda", 0)
    fanout = tuple(int(n) for n in args.fanout.split(","))
    with warpvm.Runtime(cache=args.cache) as rt:
        nodes = int(rt.cache_bytes * args.ratio) // (args.dim * 4)
        start = time.perf_counter()
        features = rt.empty((nodes, args.dim), "float32", name="features")
        labels = graphsage.fill_features(host_tensor(features), args.classes, args.seed, device)
        graph = graphsage.rmat_graph(nodes, args.edge_factor, args.seed, device)
        gib = 2**30
        print(
            f"graph: {nodes:,} nodes, {graph.num_edges:,} edges; features {nodes * args.dim * 4 / gib:.2f} "
            f"GiB in warpvm, cache {rt.cache_bytes / gib:.2f} GiB "
            f"({time.perf_counter() - start:.1f} s to generate)"
        )
        options = graphsage.LoaderOptions(args.batch_size, fanout, args.sampler)
        print(f"sampler: {graphsage.sampler_name(options)}")
        reference = host_tensor(features)  # the host copy the checks read, and the CPU loader's x
        common = {"hidden": args.hidden, "steps": args.steps, "lr": args.lr, "seed": args.seed}

        def report(name: str) -> Callable[[int, float], None]:
            return lambda step, loss: print(f"  {name} step {step:3d}  loss {loss:.4f}")

        print("training from warpvm (PagedFeatureStore), every batch's features checked:")
        paged = graphsage.run_mode(
            "warpvm",
            graph,
            options,
            rt,
            labels,
            args.dim,
            stores=graphsage.feature_store(rt, features),
            check=graphsage.features_checker(reference),
            on_step=report("warpvm"),
            **common,
        )
        stats = rt.stats()
        print("training from PyG's CPU-feature loader:")
        cpu = graphsage.run_mode(
            "cpu_gather",
            graph,
            options,
            rt,
            labels,
            args.dim,
            cpu_features=reference,
            on_step=report("cpu"),
            **common,
        )
    print("step  warpvm loss  cpu loss")
    for step, (a, b) in enumerate(zip(paged.losses, cpu.losses, strict=True)):
        print(f"{step:4d}  {a:11.4f}  {b:8.4f}")
    paged_ms, cpu_ms = (
        statistics.median(log.step_seconds[2:]) * 1e3 for log in (paged, cpu)
    )  # 2 warm-up steps
    print(
        f"max |loss difference| {graphsage.max_difference(paged.losses, cpu.losses):.2e}; median step "
        f"{paged_ms:.1f} ms from warpvm, {cpu_ms:.1f} ms from the CPU loader"
    )
    print(f"warpvm: {stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
