"""Data-parallel training of the model in train.py across several processes or
machines: fits y = w*x + b to data/points.csv by gradient descent, with every
rank working on its own shard of the points and the ranks averaging their
gradients at every step (an all_reduce), so that all ranks hold the same
weights. Rank 0 writes a checkpoint after every epoch and the fitted model and
its metrics; a retried or requeued attempt resumes from the last checkpoint.

Usage: start the same command once per rank, each with

    RANK         this process's rank, 0 .. WORLD_SIZE-1
    WORLD_SIZE   the number of ranks
    MASTER_ADDR  the host (name or address) of rank 0, reachable from all ranks
    MASTER_PORT  a free TCP port on MASTER_ADDR

for example, on one machine:

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 train_dist.py &
    RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 train_dist.py

or under torchrun, which sets these variables for its workers itself:

    torchrun --nnodes 2 --nproc_per_node 1 --node_rank R \\
        --master_addr HOST --master_port PORT train_dist.py --backend torch

(torchrun 1.13 on Python 3.11 also needs --redirects 1 --tee 1, and takes
--log_dir DIR for its logs.)

Where RANK, WORLD_SIZE, MASTER_ADDR or MASTER_PORT are unset, RBS_NODE_RANK,
RBS_NNODES, RBS_MASTER_ADDR and RBS_MASTER_PORT are used in their place. With
neither RANK nor WORLD_SIZE set, or WORLD_SIZE=1, it runs as a single process.
Each rank reads the points from --data (every rank needs its own copy).

Flags:
    --epochs N          epochs to train to, counting those already done (20)
    --lr F              learning rate (0.05)
    --batch-size N      points per rank per step (1)
    --data PATH         the points, a CSV file with columns x,y (app/data/points.csv)
    --ckpt-dir DIR      rank 0's checkpoint directory (ckpt)
    --out DIR           where rank 0 writes metrics.json (out)
    --fail-at-epoch N   exit 1 at the start of epoch N in the first attempt
                        (RBS_ATTEMPT unset or 1), to show a retry resuming
    --fail-rank R       only rank R fails there (default: every rank)
    --backend B         auto, torch or socket (auto)
    --timeout S         seconds to wait for the other ranks to come up, and
                        for any one exchange between them (60)

Backends: `torch` is torch.distributed with the gloo backend (CPU), set up with
init_method env:// and dist.all_reduce. `socket` needs only the standard
library: rank 0 listens on MASTER_PORT on all interfaces, the other ranks
connect to MASTER_ADDR:MASTER_PORT (retrying until --timeout while rank 0 comes
up), and at each step every rank sends its partial sums to rank 0, which sends
back the totals (one JSON object a line). `auto` picks torch when it can be
imported and socket otherwise; with a single process it needs neither and
reports the backend as "local" (--backend torch or socket with one rank sets
that backend up anyway; torch then takes 127.0.0.1 and a free port where
MASTER_ADDR and MASTER_PORT are unset). All ranks must use the same backend:
pass --backend where ranks may run different interpreters; mixed backends fail
with an error on every rank after about --timeout. A rank that dies while
torch is setting up the group can leave the others waiting longer than
--timeout: stop the ranks together.

For torch, where GLOO_SOCKET_IFNAME is unset and MASTER_ADDR is not a loopback
address, it is set to the interface holding the local address that reaches
MASTER_ADDR: gloo otherwise advertises the address the host name resolves to,
which is often 127.0.0.1 and unreachable from other machines.

Sharding: rank r takes rows r, r+WORLD_SIZE, r+2*WORLD_SIZE, ... of --data, in
file order, and shuffles its shard at every epoch with a seed made of the epoch
and the rank, so a resumed run takes the same steps as an uninterrupted one.
Each step, the ranks add up sum(err*x), sum(err) and the number of points over
their batches, and every rank applies the same averaged gradient.

Checkpoint: --ckpt-dir/state.json, {"epoch": E, "w": W, "b": B} after epoch E,
as train.py writes it, replaced atomically. Only rank 0 writes it; every rank
reads its own at start, and rank 0's state (which is the one that counts, since
on other machines there is none) is broadcast to all.

Output: rank 0 writes --out/metrics.json with w, b (rounded to 3 places, as in
train.py), w_exact, b_exact, loss, epochs, resumed_from, attempt, world_size,
backend, allreduce_check (an all_reduce SUM of rank+1 done once at start, which
must equal WORLD_SIZE*(WORLD_SIZE+1)/2), weights_agree and seconds. Every line
a rank prints starts with "rank R: ", e.g. "rank 1: epoch 3 loss 0.12345" and
"rank 0: all_reduce check: 3 (world size 2)".

Exit status: 0 on success, 1 when training fails (a rank lost, a check failed,
--fail-at-epoch), 2 for bad flags or a bad environment.
"""

import argparse
import csv
import json
import math
import os
import random
import socket
import sys
import time


def save(path, obj):
    """Writes obj as JSON to path atomically: a crash leaves the old file."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


class Failure(Exception):
    """Training cannot go on; the message says why."""


class BadEnv(Exception):
    """The environment does not describe a valid set of ranks."""


def log(rank, msg):
    print("rank %d: %s" % (rank, msg), flush=True)


def env(name, fallback):
    v = os.environ.get(name, "")
    if v == "":
        v = os.environ.get(fallback, "")
    return v


def parse_env():
    """Returns (rank, world_size, master_addr, master_port) from the
    environment; master_addr is "" and master_port 0 where unset."""
    rank_s = env("RANK", "RBS_NODE_RANK")
    world_s = env("WORLD_SIZE", "RBS_NNODES")
    addr = env("MASTER_ADDR", "RBS_MASTER_ADDR")
    port_s = env("MASTER_PORT", "RBS_MASTER_PORT")
    if rank_s == "" and world_s == "":
        return 0, 1, addr, 0 if port_s == "" else parse_port(port_s)
    try:
        world = int(world_s) if world_s != "" else 1
    except ValueError:
        raise BadEnv("WORLD_SIZE=%r is not a number" % world_s)
    if world < 1:
        raise BadEnv("WORLD_SIZE=%d: it must be at least 1" % world)
    if rank_s == "":
        if world > 1:
            raise BadEnv("WORLD_SIZE=%d but RANK is unset" % world)
        rank_s = "0"
    try:
        rank = int(rank_s)
    except ValueError:
        raise BadEnv("RANK=%r is not a number" % rank_s)
    if not 0 <= rank < world:
        raise BadEnv("RANK=%d is out of range for WORLD_SIZE=%d (0..%d)" % (rank, world, world - 1))
    port = 0 if port_s == "" else parse_port(port_s)
    if world > 1:
        if addr == "":
            raise BadEnv("WORLD_SIZE=%d but MASTER_ADDR is unset" % world)
        if port == 0:
            raise BadEnv("WORLD_SIZE=%d but MASTER_PORT is unset" % world)
    return rank, world, addr, port


def parse_port(s):
    try:
        port = int(s)
    except ValueError:
        raise BadEnv("MASTER_PORT=%r is not a number" % s)
    if not 0 <= port < 65536:
        raise BadEnv("MASTER_PORT=%d is not a TCP port (1..65535)" % port)
    return port


class Local:
    """A single process: every collective is the identity."""

    name = "local"

    def __init__(self, rank, world):
        self.rank, self.world = rank, world

    def all_reduce_sum(self, values):
        return [float(v) for v in values]

    def broadcast(self, obj):
        return obj

    def close(self):
        pass


class SocketGroup:
    """The ranks exchange over TCP with only the standard library: every
    collective is a request from each rank to rank 0 and a reply from rank 0
    to each, as one JSON object a line. Rank 0 adds the ranks' values in rank
    order, so every rank gets bit for bit the same totals."""

    name = "socket"

    def __init__(self, rank, world, addr, port, timeout):
        self.rank, self.world, self.timeout = rank, world, timeout
        self.seq = 0
        self.peers = {}  # rank 0: rank -> (socket, file); others: 0 -> ...
        if world == 1:
            return
        if rank == 0:
            self._serve(port)
        else:
            self._connect(addr, port)

    def _serve(self, port):
        try:
            srv = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
        except (OSError, ValueError):  # no IPv6 here
            srv = socket.create_server(("", port))
        log(self.rank, "listening on port %d for %d other rank(s)" % (port, self.world - 1))
        deadline = time.monotonic() + self.timeout
        try:
            while len(self.peers) < self.world - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(range(1, self.world)) - set(self.peers))
                    raise Failure("ranks %s did not connect within %gs" % (missing, self.timeout))
                srv.settimeout(left)
                try:
                    conn, peer = srv.accept()
                except socket.timeout:
                    continue
                peer = peer[0][7:] if peer[0].startswith("::ffff:") else peer[0]
                conn.settimeout(min(left, 10.0))
                f = conn.makefile("rb")
                try:
                    hello = json.loads(f.readline())
                    r, w = int(hello["rank"]), int(hello["world_size"])
                except (OSError, ValueError, KeyError, TypeError):
                    log(self.rank, "ignoring a connection from %s that does not speak this "
                        "script's protocol (a rank running --backend torch?)" % peer)
                    f.close()
                    conn.close()
                    continue
                if w != self.world:
                    self._refuse(conn, "rank %d says WORLD_SIZE=%d, rank 0 has %d" % (r, w, self.world))
                if not 0 < r < self.world:
                    self._refuse(conn, "a rank %d connected (from %s), out of range 1..%d"
                                 % (r, peer, self.world - 1))
                if r in self.peers:
                    self._refuse(conn, "a second rank %d connected (from %s)" % (r, peer))
                conn.settimeout(self.timeout)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.peers[r] = (conn, f)
        finally:
            srv.close()
        for conn, _ in self.peers.values():
            conn.sendall(b'{"ok": true}\n')

    def _refuse(self, conn, why):
        try:
            conn.sendall((json.dumps({"error": why}) + "\n").encode())
        except OSError:
            pass
        conn.close()
        raise Failure(why)

    def _connect(self, addr, port):
        deadline = time.monotonic() + self.timeout
        last = None
        while True:
            try:
                conn = socket.create_connection((addr, port), timeout=5)
                break
            except OSError as e:  # refused, unreachable, not resolvable yet
                last = e
            if time.monotonic() >= deadline:
                raise Failure("could not connect to rank 0 at %s:%d within %gs: %s"
                              % (addr, port, self.timeout, last))
            time.sleep(0.5)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(self.timeout)
        f = conn.makefile("rb")
        self.peers[0] = (conn, f)
        self._send(0, {"rank": self.rank, "world_size": self.world})
        reply = self._recv(0)
        if "error" in reply:
            raise Failure("rank 0 refused this rank: %s" % reply["error"])
        log(self.rank, "connected to rank 0 at %s:%d" % (addr, port))

    def _send(self, r, obj):
        try:
            self.peers[r][0].sendall((json.dumps(obj) + "\n").encode())
        except OSError as e:
            raise Failure("lost rank %d: %s" % (r, e))

    def _recv(self, r):
        try:
            line = self.peers[r][1].readline()
        except socket.timeout:
            raise Failure("rank %d sent nothing for %gs" % (r, self.timeout))
        except OSError as e:
            raise Failure("lost rank %d: %s" % (r, e))
        if not line:
            raise Failure("lost rank %d: it closed the connection" % r)
        try:
            return json.loads(line)
        except ValueError:
            raise Failure("rank %d sent something that is not JSON: %r" % (r, line[:80]))

    def _exchange(self, op, payload, combine):
        """Every rank gives payload; rank 0 computes combine(payloads in rank
        order) and every rank returns it."""
        self.seq += 1
        if self.world == 1:
            return combine([payload])
        if self.rank != 0:
            self._send(0, {"op": op, "seq": self.seq, "v": payload})
            reply = self._recv(0)
            if "error" in reply:
                raise Failure("rank 0 gave up: %s" % reply["error"])
            return reply["v"]
        got = [payload]
        try:
            for r in range(1, self.world):
                m = self._recv(r)
                if m.get("op") != op or m.get("seq") != self.seq:
                    raise Failure("rank %d is out of step: it sent %s #%s where rank 0 is at %s #%d"
                                  % (r, m.get("op"), m.get("seq"), op, self.seq))
                got.append(m["v"])
        except Failure as e:
            self._tell_all({"error": str(e)})
            raise
        result = combine(got)
        self._tell_all({"v": result})
        return result

    def _tell_all(self, obj):
        for r in range(1, self.world):
            try:
                self._send(r, obj)
            except Failure:
                pass

    def all_reduce_sum(self, values):
        def add(rows):
            total = [float(v) for v in rows[0]]
            for row in rows[1:]:
                if len(row) != len(total):
                    raise Failure("ranks sent %d and %d values to one all_reduce" % (len(total), len(row)))
                total = [a + float(b) for a, b in zip(total, row)]
            return total
        return self._exchange("all_reduce", [float(v) for v in values], add)

    def broadcast(self, obj):
        return self._exchange("broadcast", obj if self.rank == 0 else None, lambda rows: rows[0])

    def close(self):
        for conn, f in self.peers.values():
            f.close()
            conn.close()
        self.peers = {}


def interface_for(addr, port):
    """The name of the local interface whose address this host uses to reach
    addr, or None. Linux only (SIOCGIFADDR)."""
    import fcntl
    import struct
    try:
        infos = socket.getaddrinfo(addr, port, socket.AF_INET, socket.SOCK_DGRAM)
        target = infos[0][4][0]
        if target.startswith("127."):
            return None
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.connect((target, port))  # picks a route; sends nothing
            local = u.getsockname()[0]
            for _, name in socket.if_nameindex():
                try:
                    req = struct.pack("256s", name.encode()[:15])
                    got = fcntl.ioctl(u.fileno(), 0x8915, req)  # SIOCGIFADDR
                except OSError:
                    continue
                if socket.inet_ntoa(got[20:24]) == local:
                    return name
        finally:
            u.close()
    except OSError:
        return None
    return None


class TorchGroup:
    """torch.distributed with gloo, set up from the environment (env://):
    the form that torchrun and a plain RANK/WORLD_SIZE/MASTER_* launch share."""

    name = "torch"

    def __init__(self, rank, world, addr, port, timeout):
        import datetime
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        self.rank, self.world = rank, world
        if not dist.is_available() or not dist.is_gloo_available():
            raise Failure("this torch (%s) has no gloo backend" % torch.__version__)
        # env:// reads these; fill in what came from RBS_* or was left unset.
        if addr == "":
            addr = "127.0.0.1"
        if port == 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        os.environ["MASTER_ADDR"] = addr
        os.environ["MASTER_PORT"] = str(port)
        if world > 1 and not os.environ.get("GLOO_SOCKET_IFNAME"):
            ifname = interface_for(addr, port)
            if ifname:
                os.environ["GLOO_SOCKET_IFNAME"] = ifname
                log(rank, "GLOO_SOCKET_IFNAME=%s (the interface that reaches MASTER_ADDR %s)" % (ifname, addr))
        log(rank, "torch %s, gloo, rendezvous at %s:%d" % (torch.__version__, addr, port))
        try:
            dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=timeout))
        except RuntimeError as e:
            raise Failure("torch.distributed could not set up the group at %s:%d: %s" % (addr, port, e))

    def all_reduce_sum(self, values):
        t = self.torch.tensor([float(v) for v in values], dtype=self.torch.float64)
        try:
            self.dist.all_reduce(t, op=self.dist.ReduceOp.SUM)
        except RuntimeError as e:
            raise Failure("all_reduce failed (a rank lost?): %s" % e)
        return t.tolist()

    def broadcast(self, obj):
        box = [obj if self.rank == 0 else None]
        try:
            self.dist.broadcast_object_list(box, src=0)
        except RuntimeError as e:
            raise Failure("broadcast failed (a rank lost?): %s" % e)
        return box[0]

    def close(self):
        try:
            self.dist.destroy_process_group()
        except (RuntimeError, AssertionError):
            pass


def torch_importable():
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_gloo_available()


def make_group(backend, rank, world, addr, port, timeout):
    if backend == "auto":
        if world == 1:
            return Local(rank, world)
        backend = "torch" if torch_importable() else "socket"
    if backend == "torch":
        try:
            import torch  # noqa: F401
        except ImportError as e:
            raise Failure("--backend torch, but torch cannot be imported by %s: %s" % (sys.executable, e))
        return TorchGroup(rank, world, addr, port, timeout)
    return SocketGroup(rank, world, addr, port, timeout)


def partial_sums(w, b, batch):
    gw = gb = 0.0
    for x, y in batch:
        err = w * x + b - y
        gw += err * x
        gb += err
    return [gw, gb, float(len(batch))]


def global_loss(group, w, b, shard):
    sq, n = group.all_reduce_sum([sum((w * x + b - y) ** 2 for x, y in shard), float(len(shard))])
    return sq / n


def train(a, rank, world, group, t0):
    with open(a.data) as f:
        points = [(float(r["x"]), float(r["y"])) for r in csv.DictReader(f)]
    if not points:
        raise Failure("%s has no points" % a.data)
    shard = points[rank::world]

    total = group.all_reduce_sum([rank + 1])[0]
    check = int(total) if total == int(total) else total
    log(rank, "all_reduce check: %s (world size %d)" % (check, world))
    if total != world * (world + 1) / 2:
        raise Failure("all_reduce check failed: got %s, want %d" % (check, world * (world + 1) // 2))

    ckpt = os.path.join(a.ckpt_dir, "state.json")
    state = {"epoch": 0, "w": 0.0, "b": 0.0}
    if os.path.exists(ckpt):
        with open(ckpt) as f:
            state = json.load(f)
        log(rank, "found checkpoint %s at epoch %d" % (ckpt, state["epoch"]))
    # Rank 0's checkpoint is the one that counts; with it go the settings that
    # must agree for the ranks to take the same steps.
    mine = {"state": state, "epochs": a.epochs, "lr": a.lr, "batch_size": a.batch_size,
            "points": len(points)}
    ref = group.broadcast(mine)
    for k in ("epochs", "lr", "batch_size", "points"):
        if ref[k] != mine[k]:
            raise Failure("rank 0 has %s=%s, this rank %s (ranks must run the same command on the same data)"
                          % (k, ref[k], mine[k]))
    if rank != 0 and ref["state"] != state and os.path.exists(ckpt):
        log(rank, "using rank 0's checkpoint (epoch %d), not this rank's (epoch %d)"
            % (ref["state"]["epoch"], state["epoch"]))
    state = {"epoch": int(ref["state"]["epoch"]), "w": float(ref["state"]["w"]), "b": float(ref["state"]["b"])}
    if state["epoch"] > 0:
        log(rank, "resuming from epoch %d (w=%.3f b=%.3f)" % (state["epoch"], state["w"], state["b"]))
    resumed_from = state["epoch"]

    attempt = int(os.environ.get("RBS_ATTEMPT", "1") or "1")
    per_rank = math.ceil(len(points) / world)  # the largest shard: rank 0's
    steps = math.ceil(per_rank / a.batch_size)
    loss = None
    for epoch in range(state["epoch"] + 1, a.epochs + 1):
        if attempt == 1 and epoch == a.fail_at_epoch and a.fail_rank in (-1, rank):
            log(rank, "epoch %d: failing on purpose" % epoch)
            sys.exit(1)
        order = list(shard)
        random.Random(epoch * 1000003 + rank).shuffle(order)
        w, b = state["w"], state["b"]
        for i in range(steps):
            gw, gb, n = group.all_reduce_sum(partial_sums(w, b, order[i * a.batch_size:(i + 1) * a.batch_size]))
            w -= a.lr * gw / n
            b -= a.lr * gb / n
        state = {"epoch": epoch, "w": w, "b": b}
        loss = global_loss(group, w, b, shard)
        if rank == 0:
            save(ckpt, state)
        log(rank, "epoch %d loss %.5f" % (epoch, loss))
    if loss is None:
        loss = global_loss(group, state["w"], state["b"], shard)

    ref = group.broadcast([state["w"], state["b"]])
    mismatches = group.all_reduce_sum([0.0 if ref == [state["w"], state["b"]] else 1.0])[0]
    agree = mismatches == 0
    if world == 1:
        same = "one rank"
    elif agree:
        same = "the same on all %d ranks" % world
    else:
        same = "DIFFERENT from rank 0's on %d rank(s)" % int(mismatches)
    log(rank, "final w=%r b=%r (%s)" % (state["w"], state["b"], same))
    if rank == 0:
        path = os.path.join(a.out, "metrics.json")
        save(path, {
            "w": round(state["w"], 3), "b": round(state["b"], 3), "loss": loss,
            "epochs": state["epoch"], "resumed_from": resumed_from, "attempt": attempt,
            "world_size": world, "backend": group.name, "allreduce_check": check,
            "weights_agree": agree, "w_exact": state["w"], "b_exact": state["b"],
            "seconds": round(time.monotonic() - t0, 3),
        })
        log(rank, "wrote %s: w=%.3f b=%.3f" % (path, state["w"], state["b"]))
    if not agree:
        raise Failure("the ranks ended with different weights")


def main():
    t0 = time.monotonic()
    p = argparse.ArgumentParser(description="Data-parallel training of y = w*x + b across WORLD_SIZE ranks.")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch-size", type=int, default=1, help="points per rank per step")
    p.add_argument("--data", default="app/data/points.csv")
    p.add_argument("--ckpt-dir", default="ckpt")
    p.add_argument("--out", default="out")
    p.add_argument("--fail-at-epoch", type=int, default=0,
                   help="exit 1 at this epoch in the first attempt, to show a retry resuming")
    p.add_argument("--fail-rank", type=int, default=-1,
                   help="with --fail-at-epoch: only this rank fails (default: all ranks)")
    p.add_argument("--backend", choices=["auto", "torch", "socket"], default="auto")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for the other ranks to come up, and for any one exchange")
    a = p.parse_args()
    if a.batch_size < 1:
        p.error("--batch-size must be at least 1")
    if a.timeout <= 0:
        p.error("--timeout must be positive")

    try:
        rank, world, addr, port = parse_env()
    except BadEnv as e:
        print("train_dist.py: bad environment: %s" % e, file=sys.stderr, flush=True)
        sys.exit(2)

    group = None
    try:
        group = make_group(a.backend, rank, world, addr, port, a.timeout)
        log(rank, "backend %s, world size %d, %.1fs to set up" % (group.name, world, time.monotonic() - t0))
        train(a, rank, world, group, t0)
    except Failure as e:
        log(rank, "error: %s" % e)
        sys.exit(1)
    finally:
        if group is not None:
            group.close()


if __name__ == "__main__":
    main()
