"""A small training run in pure Python: fits y = w*x + b to data/points.csv
by stochastic gradient descent, writes a checkpoint after every epoch, and
resumes from the last one when it finds it (a retried or requeued attempt).
The fitted model and its metrics go to out/metrics.json."""

import argparse
import csv
import json
import os
import random
import sys


def save(path, obj):
    """Writes obj as JSON to path atomically: a crash leaves the old file."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--data", default="app/data/points.csv")
    p.add_argument("--ckpt-dir", default="ckpt")
    p.add_argument("--out", default="out")
    p.add_argument("--fail-at-epoch", type=int, default=0,
                   help="exit 1 at this epoch in the first attempt, to show a retry resuming")
    a = p.parse_args()

    with open(a.data) as f:
        points = [(float(r["x"]), float(r["y"])) for r in csv.DictReader(f)]
    ckpt = os.path.join(a.ckpt_dir, "state.json")
    state = {"epoch": 0, "w": 0.0, "b": 0.0}
    if os.path.exists(ckpt):
        with open(ckpt) as f:
            state = json.load(f)
        print("resuming from epoch %d (w=%.3f b=%.3f)" % (state["epoch"], state["w"], state["b"]), flush=True)
    resumed_from = state["epoch"]
    rng = random.Random(state["epoch"])
    attempt = int(os.environ.get("RBS_ATTEMPT", "1"))
    loss = 0.0
    for epoch in range(state["epoch"] + 1, a.epochs + 1):
        if attempt == 1 and epoch == a.fail_at_epoch:
            print("epoch %d: failing on purpose" % epoch, flush=True)
            sys.exit(1)
        rng.shuffle(points)
        for x, y in points:
            err = state["w"] * x + state["b"] - y
            state["w"] -= a.lr * err * x
            state["b"] -= a.lr * err
        loss = sum((state["w"] * x + state["b"] - y) ** 2 for x, y in points) / len(points)
        state["epoch"] = epoch
        save(ckpt, state)
        print("epoch %d loss %.5f" % (epoch, loss), flush=True)
    save(os.path.join(a.out, "metrics.json"), {
        "w": round(state["w"], 3), "b": round(state["b"], 3), "loss": loss,
        "epochs": state["epoch"], "resumed_from": resumed_from, "attempt": attempt,
    })
    print("wrote %s: w=%.3f b=%.3f" % (os.path.join(a.out, "metrics.json"), state["w"], state["b"]))


if __name__ == "__main__":
    main()
