#!/usr/bin/env python3
"""An elastic PyTorch DDP training script for corral (docs/elastic.md, "Running an elastic job").

    corral submit --nodes 1-2 --gpus-per-node 2 --procs-per-node 2 --launcher torchrun \
        --checkpoint-grace 60s -- examples/elastic_ddp.py --steps 20000
    corral submit --gpus 2-8 --procs-per-node 2 --launcher torchrun -- examples/elastic_ddp.py

corral runs every generation of the job (its first start, each resize, a requeue after a
preemption) as a fresh torchrun at the job's size then; this script makes the generations one
training run:
  - it resumes from the newest checkpoint in CORRAL_CHECKPOINT_DIR (the same folder for every
    generation), so steps continue where the last generation saved;
  - the global batch is fixed (--batch): each of WORLD_SIZE ranks takes its share of it, and the
    ranks' loss is scaled so that DDP's average of their gradients is the gradient of the whole
    batch, whatever the world size. The learning rate then needs no change on a resize;
  - when corral asks the job to stop (corral.job.should_stop(): the stop file or SIGTERM), the
    ranks agree on the step to stop at, rank 0 saves a checkpoint (a temporary file renamed into
    place, so that a stop during the write leaves the previous one whole) and records it
    (corral.job.checkpoint), and every rank exits 0, within the grace corral gives.

The model is a small linear regression on synthetic data whose features have widely spread
scales, so that its loss keeps falling for thousands of steps (on CPU with gloo, or on GPUs with
NCCL). Rank 0 appends one JSON line per report to CORRAL_CHECKPOINT_DIR/progress.jsonl (step,
loss, world size, generation) and reports step and loss to corral (the job's page charts them).

Outside corral (no CORRAL_CHECKPOINT_DIR) give --checkpoint-dir; `torchrun --nproc_per_node 2
elastic_ddp.py --checkpoint-dir /tmp/ckpt` trains on this machine.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

try:
    import corral.job as corral_job  # clients/python: on PYTHONPATH or installed (docs/python.md)
except ImportError:  # runs without corral's client too (no reports; stops on SIGTERM only)
    corral_job = None

CHECKPOINT = "latest.pt"  # the newest checkpoint; a save replaces it atomically
PROGRESS = "progress.jsonl"  # one line per report and per generation start (rank 0 writes)
FEATURES = 64


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20000, help="train until this step, then exit 0")
    p.add_argument("--batch", type=int, default=256, help="global batch (all ranks together)")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (for --batch)")
    p.add_argument("--seed", type=int, default=0, help="the data's seed")
    p.add_argument("--checkpoint-every", type=int, default=500, help="steps between checkpoints")
    p.add_argument("--report-every", type=float, default=2.0, help="seconds between reports")
    p.add_argument("--checkpoint-dir", help="default: CORRAL_CHECKPOINT_DIR")
    p.add_argument("--step-time", type=float, default=0.0,
                   help="seconds each step takes at least (a demo knob: lets this tiny model "
                        "train as long as a real one would)")
    return p.parse_args()


def stop_requested():
    return corral_job is not None and corral_job.should_stop()


def in_corral_job():
    return corral_job is not None and bool(os.environ.get("CORRAL_JOB_TOKEN"))


def tell_corral(send, *args, **kwargs):
    """A report or checkpoint record that fails (the server unreachable for a while) is
    printed, not fatal: the training and its checkpoint files go on."""
    try:
        send(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 (corral.CorralError, OSError, ...)
        print(f"elastic_ddp.py: could not tell corral: {err}", flush=True)


class Problem:
    """y = X w* with feature i scaled by 1/(i+1): the loss falls fast at first, then slowly for
    thousands of steps (the small-scale directions converge last), as a real model's does."""

    def __init__(self, seed, device):
        g = torch.Generator().manual_seed(seed)
        self.scale = (1.0 / torch.arange(1, FEATURES + 1, dtype=torch.float32)).to(device)
        self.target = torch.randn(FEATURES, 1, generator=g).to(device)
        self.seed = seed
        self.device = device
        self.eval_x, self.eval_y = self.batch(-1, 1024)

    def batch(self, step, size):
        """The global batch of `step`: the same on every rank and at every world size."""
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + step + 1)
        x = torch.randn(size, FEATURES, generator=g).to(self.device) * self.scale
        return x, x @ self.target


def share(size, rank, world):
    """Rank's slice [begin, end) of a batch of `size` split as evenly as world allows."""
    base, extra = divmod(size, world)
    begin = rank * base + min(rank, extra)
    return begin, begin + base + (1 if rank < extra else 0)


def save_checkpoint(folder, state):
    """Writes the checkpoint to a temporary name, then renames it over the previous one: a
    reader (the next generation) sees the old checkpoint or the new one, never half of one."""
    path = os.path.join(folder, CHECKPOINT)
    tmp = path + ".tmp"
    torch.save(state, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def log_progress(folder, record):
    with open(os.path.join(folder, PROGRESS), "a") as f:
        f.write(json.dumps(record) + "\n")


def main():
    args = parse_args()
    folder = args.checkpoint_dir or (corral_job.checkpoint_dir() if corral_job else None)
    if not folder:
        raise SystemExit("elastic_ddp.py: no checkpoint folder (the cluster has no checkpoint "
                         "root: give --checkpoint-dir)")
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(device)
    generation = int(os.environ.get("CORRAL_GENERATION", 1))

    problem = Problem(args.seed, device)
    model = torch.nn.Linear(FEATURES, 1, bias=False).to(device)
    torch.nn.init.zeros_(model.weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step = 0
    path = os.path.join(folder, CHECKPOINT)
    if os.path.exists(path):  # a later generation: resume where the last one saved
        state = torch.load(path, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
    # Rank 0's weights go to every rank here in any case (DDP broadcasts them).
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    if rank == 0:
        log_progress(folder, {"event": "start", "step": step, "world_size": world,
                              "generation": generation, "time": time.time()})
        print(f"generation {generation}: world size {world}, from step {step}", flush=True)

    def checkpoint(reason):
        if rank == 0:
            saved = save_checkpoint(folder, {"model": model.state_dict(),
                                             "optimizer": optimizer.state_dict(), "step": step,
                                             "world_size": world})
            log_progress(folder, {"event": "checkpoint", "step": step, "reason": reason,
                                  "time": time.time()})
            if in_corral_job():
                tell_corral(corral_job.checkpoint, saved, step=step)
        dist.barrier()

    begin, end = share(args.batch, rank, world)
    flag = torch.zeros(1, device=device)
    last_report = 0.0
    stopped = False
    while step < args.steps:
        # Every rank must stop at the same step (a rank that left would hang the others'
        # all-reduce): they agree on it each step, which costs one tiny all-reduce.
        flag.fill_(1.0 if stop_requested() else 0.0)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item() > 0:
            stopped = True
            break
        started = time.monotonic()
        x, y = problem.batch(step, args.batch)
        x, y = x[begin:end], y[begin:end]
        # Sum over this rank's share / global batch, times world (DDP divides by it): the
        # gradient of the global batch's mean, at any world size.
        loss = ((ddp(x) - y) ** 2).sum() / args.batch * world
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % args.checkpoint_every == 0 and step < args.steps:
            checkpoint("periodic")
        if rank == 0 and time.monotonic() - last_report >= args.report_every:
            last_report = time.monotonic()
            with torch.no_grad():
                eval_loss = ((model(problem.eval_x) - problem.eval_y) ** 2).mean().item()
            log_progress(folder, {"event": "report", "step": step, "loss": eval_loss,
                                  "world_size": world, "generation": generation,
                                  "time": time.time()})
            if in_corral_job():
                tell_corral(corral_job.report, step=step, loss=eval_loss, world_size=world)
        rest = args.step_time - (time.monotonic() - started)
        if rest > 0:
            time.sleep(rest)
    checkpoint("stop" if stopped else "done")
    if rank == 0:
        print(f"generation {generation}: {'stopped' if stopped else 'done'} at step {step}",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
