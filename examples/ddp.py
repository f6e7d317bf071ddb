"""ddp.py -- a tiny real DistributedDataParallel job for elasticd (or torchrun).

Run it under an agent, which provides RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR
and MASTER_PORT in the environment:

    PYTHON_EXEC=/usr/bin/python3 build/src/elasticd --standalone --nproc-per-node 2 examples/ddp.py

What it does, on CPU with the gloo backend, in a few seconds:
  1. init_process_group("gloo", init_method="env://") from the agent's variables;
  2. builds a small model (Linear 8->4->1) with a seed that differs per rank, so
     the ranks start with different weights: DDP must broadcast rank 0's;
  3. trains a few dozen SGD steps on rank-dependent random data (DDP averages
     the gradients, so the replicas stay identical);
  4. all_gathers the flattened parameters and checks every rank holds exactly
     the same weights.
Rank 0 prints a short summary. The exit status is 0 when every rank agrees, 1
on a mismatch (an exception, recorded into TORCHELASTIC_ERROR_FILE by @record
so the agent can show the root cause).

Options: --steps N (default 40).
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP


class WeightMismatch(RuntimeError):
    pass


@record
def main() -> int:
    parser = argparse.ArgumentParser(description="Tiny DDP smoke job (gloo, CPU).")
    parser.add_argument("--steps", type=int, default=40, help="SGD steps (default 40)")
    args = parser.parse_args()

    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    world = dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.set_num_threads(1)

    # Different initial weights per rank; DDP's constructor broadcasts rank 0's.
    torch.manual_seed(1234 + rank)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    loss_fn = torch.nn.MSELoss()

    # Rank-dependent data: each replica sees its own shard.
    gen = torch.Generator().manual_seed(100 + rank)
    target_w = torch.arange(1.0, 9.0).unsqueeze(1) / 8.0
    loss = torch.tensor(0.0)
    for _ in range(args.steps):
        x = torch.randn(32, 8, generator=gen)
        y = x @ target_w + 0.01 * torch.randn(32, 1, generator=gen)
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()

    # Every rank must end with bit-identical parameters.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    bad = [r for r, t in enumerate(gathered) if not torch.equal(t, gathered[0])]

    # Average the final loss for the summary.
    mean_loss = loss.detach().clone()
    dist.all_reduce(mean_loss)
    mean_loss /= world
    # Everyone is done with the collectives before anyone tears down: without
    # an agent store (etcd backend), rank 0 hosts the TCPStore, and its exit
    # must not pull the store from under a rank still shutting down.
    dist.barrier()
    dist.destroy_process_group()

    if bad:
        raise WeightMismatch(
            f"rank {rank} (local {local_rank}): ranks {bad} differ from rank 0 after "
            f"{args.steps} steps"
        )
    if rank == 0:
        print(
            f"ddp.py: world size {world}, {args.steps} steps, final loss {mean_loss.item():.4f}, "
            f"{flat.numel()} parameters: all {world} ranks have identical weights",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
