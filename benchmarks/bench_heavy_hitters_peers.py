"""Heavy hitters beside pure-ldp 1.2.0: PEM, TreeHist and SFP on one Zipf law over 2^32 ids (issue 29).

    python benchmarks/bench_heavy_hitters_peers.py --peer-python /tmp/peers/bin/python \
        [--users 1000000] [--peer-users 1000000] [--eps 4] [--k 64] [--protocols pem treehist sfp] \
        [--cms-hashes 256] [--cms-buckets 1024] [--seed 1] [--ldpsim-sfp]

Data: ``zipf`` (exponent 1.1 over 2^16 ranks scattered over 2^32 ids, seed 0), as in bench_heavy_hitters.py.
pure-ldp gets the first --peer-users of the same users (its clients and servers take one user per Python
call), as strings: PEM and TreeHist the id's 32 bits, most significant first (``format(v, "032b")``, so a
prefix of L characters is ldpsim's L-bit prefix ``v >> (32 - L)``); SFP its 8 lowercase hex digits
(``format(v, "08x")``, alphabet 0-9a-f, fragments of 2 characters = 8 bits). Found strings map back with
``int(s, 2)`` / ``int(s, 16)``; one holding pure-ldp's padding character "*" is no id and scores as a miss.

Settings: the same eps and k; PEM with start_bits = ceil(log2 k) = 6 and step 2 (13 groups) on both sides;
TreeHist bit by bit (32 levels, eps/2 on the prefix, eps/2 on the word) on both sides; SFP with Apple's
8-bit word hash and 2-character fragments. pure-ldp's frequency oracle is its Apple CMS (--cms-hashes x
--cms-buckets): its default, OLH, allocates ``np.zeros(2^L)`` per level and loops over all 2^L values in
Python per report, so it cannot run on 2^32 ids, and SFP requires a sketch oracle. ldpsim's PEM uses OLH and
its TreeHist Hadamard response, as published, each level decoded by the exact MLE over candidates + "other".

pure-ldp 1.2.0 under numpy 2 / xxhash 4 needs two shims, applied inside the peer script only, neither
changing what is computed: numpy 2 refuses ``np.zeros(None)`` (``FreqOracleServer.__init__`` with d=None,
as every CMS server has; numpy 1 returned a 0-d array there, and the sketch never reads it), so the module's
``np.zeros`` maps None to (); xxhash 4 refuses str input ("Strings must be encoded before hashing"), so
``pure_ldp.core``'s hashes get the UTF-8 bytes of the string (what xxhash < 3 hashed for a str).

Seconds are wall and CPU (``time.process_time``) per phase: ldpsim's sampling (users' reports, aggregated)
and estimation; pure-ldp's clients (``privatise``), server ``aggregate`` and ``find_heavy_hitters``. Where
--peer-users < --users, pure-ldp's client and aggregate seconds are also scaled linearly to --users (said
so). Scores: precision, recall, F1 of the found top-k against the law's top-k, and the mean absolute
frequency error of the found items (``top_k_score``). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# one BLAS thread, as bench_heavy_hitters.py (small level Hessians on a loaded machine)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from ldpsim_plugins.datasets.open_domain import OpenData, zipf
from ldpsim_plugins.estimators.heavy_hitters import pem_heavy_hitters, treehist_heavy_hitters
from ldpsim_plugins.mechanisms.heavy_hitters import PEM, TreeHist

from ldpsim import OpenDomain, TopKScore, top_k_score

PEER = r"""
import json, random, sys, time, types, warnings
import numpy as np
import xxhash
import pure_ldp.core as core
import pure_ldp.core._freq_oracle_server as fos

# shim 1 (numpy 2): np.zeros(None) -> np.zeros(()), numpy 1's meaning, in FreqOracleServer only
fos.np = types.SimpleNamespace(**{**vars(np), "zeros": lambda s, *a, **kw: np.zeros(() if s is None else s, *a, **kw)})
# shim 2 (xxhash 4): hash a str as its UTF-8 bytes, what xxhash < 3 did, in pure_ldp.core's hash functions
core.xxhash = types.SimpleNamespace(xxh64=lambda d, seed=0: xxhash.xxh64(d.encode() if isinstance(d, str) else d, seed=seed))

from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
from pure_ldp.heavy_hitters.apple_sfp import SFPClient, SFPServer
from pure_ldp.heavy_hitters.prefix_extending import PEMClient, PEMServer
from pure_ldp.heavy_hitters.treehistogram import TreeHistClient, TreeHistServer

warnings.simplefilter("ignore")  # its "n < 10000" warnings, once per estimate
protocol, path = sys.argv[1], sys.argv[2]
eps, k, hashes, buckets, start, step = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
random.seed(int(sys.argv[9]))
np.random.seed(int(sys.argv[9]))
values = np.load(path)
server = CMSServer(eps, hashes, buckets)
client = CMSClient(eps, server.get_hash_funcs(), buckets)
if protocol == "pem":
    words = [format(int(v), "032b") for v in values]
    c, s = PEMClient(eps, start, 32, step, fo_client=client), PEMServer(eps, start, 32, step, fo_server=server)
elif protocol == "treehist":
    words = [format(int(v), "032b") for v in values]
    c, s = TreeHistClient(eps, step, 32, fo_client=client), TreeHistServer(eps, 32, step, fo_server=server)
else:
    hexdigits = set("0123456789abcdef")
    words = [format(int(v), "08x") for v in values]
    c = SFPClient(eps, 2, 8, alphabet=set(hexdigits), fo_client=client)
    s = SFPServer(eps, 2, 8, alphabet=set(hexdigits), fo_server=server)
out = {"client": [0.0, 0.0], "aggregate": [0.0, 0.0]}


def timed(name, fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    out[name][0] += time.perf_counter() - wall
    out[name][1] += time.process_time() - cpu
    return result


for lo in range(0, len(words), 5000):  # chunks: a CMS report is an m-vector, 10^6 of them would not fit
    reports = timed("client", lambda: [c.privatise(w) for w in words[lo : lo + 5000]])
    timed("aggregate", lambda: [s.aggregate(r) for r in reports])
out["estimate"] = [0.0, 0.0]
found, freq = timed("estimate", lambda: s.find_heavy_hitters(k=k))
print(json.dumps({**out, "found": [str(f) for f in found], "freq": [float(f) / len(words) for f in freq]}))
"""


def clocked(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds, result) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def score(found: np.ndarray, frequency: np.ndarray, data: OpenData, k: int) -> TopKScore:
    return top_k_score(found, frequency, data.items, data.frequency, k)


def ldpsim_run(
    protocol: str, data: OpenData, values: np.ndarray, eps: float, k: int, seed: int, sketch: tuple[int, int]
) -> dict[str, Any]:
    """ldpsim's protocol on ``values``: seconds per phase and the score (``sketch``: SFP's CMS hashes x buckets)."""
    rng = np.random.default_rng(seed)
    if protocol == "pem":
        pem = PEM(data.domain, eps, k=k, step=2)
        s_wall, s_cpu, reports = clocked(lambda: pem.sample(values, rng))
        e_wall, e_cpu, found = clocked(lambda: pem_heavy_hitters(pem, reports))
    elif protocol == "treehist":
        th = TreeHist(data.domain, eps, k=k, step=1)
        s_wall, s_cpu, reports = clocked(lambda: th.sample(values, rng))
        e_wall, e_cpu, found = clocked(lambda: treehist_heavy_hitters(th, reports))
    else:
        return ldpsim_sfp(data, values, eps, k, seed, sketch)
    return {
        "sample": (s_wall, s_cpu),
        "estimate": (e_wall, e_cpu),
        "score": score(found.items, found.frequency, data, k),
    }


def ldpsim_sfp(
    data: OpenData, values: np.ndarray, eps: float, k: int, seed: int, sketch: tuple[int, int]
) -> dict[str, Any]:
    """ldpsim's SFP (plugins/mechanisms/sfp.py, being written in parallel), where it exists.

    Same settings as pure-ldp's SFP here: 8-bit fragments (2 hex digits), an 8-bit word hash, CMS with
    pure-ldp's sketch sizes. The call follows the API its task names (``SFP(domain, eps, k=, fragment_bits=,
    hash_bits=, oracle=, hashes=, buckets=)``, ``sfp.sample(values, rng)``, ``sfp_heavy_hitters(protocol,
    reports)``); a different one is reported, not guessed further.
    """
    if importlib.util.find_spec("ldpsim_plugins.mechanisms.sfp") is None:
        return {"skipped": "ldpsim_plugins.mechanisms.sfp does not exist yet"}
    try:
        from ldpsim_plugins.estimators.sfp import sfp_heavy_hitters  # type: ignore[import-not-found]
        from ldpsim_plugins.mechanisms.sfp import SFP  # type: ignore[import-not-found]

        sfp = SFP(
            data.domain, eps, k=k, fragment_bits=8, hash_bits=8, oracle="cms", hashes=sketch[0], buckets=sketch[1]
        )
        rng = np.random.default_rng(seed)
        s_wall, s_cpu, reports = clocked(lambda: sfp.sample(values, rng))
        e_wall, e_cpu, found = clocked(lambda: sfp_heavy_hitters(sfp, reports))
    except (ImportError, TypeError, AttributeError) as exc:
        return {"skipped": f"ldpsim SFP's API differs from the one assumed here: {type(exc).__name__}: {exc}"}
    return {
        "sample": (s_wall, s_cpu),
        "estimate": (e_wall, e_cpu),
        "score": score(found.items, found.frequency, data, k),
    }


def peer_ids(protocol: str, found: list[str]) -> np.ndarray:
    """pure-ldp's found strings as ids; one that is no id (holds the padding "*") gets a distinct id >= 2^32."""
    base = 2 if protocol in ("pem", "treehist") else 16
    ids = []
    for i, text in enumerate(found):
        try:
            ids.append(int(text, base))
        except ValueError:
            ids.append((1 << 32) + i)
    return np.asarray(ids, dtype=np.uint64)


def peer_run(
    python: str,
    protocol: str,
    values: np.ndarray,
    data: OpenData,
    eps: float,
    k: int,
    hashes: int,
    buckets: int,
    seed: int,
) -> dict[str, Any]:
    """pure-ldp's protocol on ``values`` in its own interpreter: seconds per phase and the score."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "values.npy"
        np.save(path, values)
        start = max(0, int(np.ceil(np.log2(k))))
        step = 2 if protocol == "pem" else 1
        args = [
            python,
            "-c",
            PEER,
            protocol,
            str(path),
            str(eps),
            str(k),
            str(hashes),
            str(buckets),
            str(start),
            str(step),
            str(seed),
        ]
        done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        return {"skipped": f"pure-ldp {protocol} fails: {last}"}
    out = json.loads(done.stdout)
    found = peer_ids(protocol, out["found"])
    return {
        "client": tuple(out["client"]),
        "aggregate": tuple(out["aggregate"]),
        "estimate": tuple(out["estimate"]),
        "score": score(found, np.asarray(out["freq"], dtype=float), data, k),
        "invalid": int((found >= np.uint64(1 << 32)).sum()),
    }


def seconds(pair: tuple[float, float]) -> str:
    return f"{pair[0]:.1f} / {pair[1]:.1f}"


def row(name: str, n: int, result: dict[str, Any], phases: list[str], note: str = "") -> str:
    if "skipped" in result:
        return f"| {name} | {n:,} | {result['skipped']} | | | | | |"
    total = (sum(result[p][0] for p in phases), sum(result[p][1] for p in phases))
    s = result["score"]
    detail = ", ".join(f"{p} {seconds(result[p])}" for p in phases)
    return (
        f"| {name} | {n:,} | {seconds(total)} | {detail}{note} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f}"
        f" | {s.frequency_error:.2e} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10**6)
    parser.add_argument("--peer-users", type=int, default=None, help="pure-ldp's users (default: --users)")
    parser.add_argument("--eps", type=float, default=4.0)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument(
        "--protocols", nargs="+", default=["pem", "treehist", "sfp"], choices=["pem", "treehist", "sfp"]
    )
    parser.add_argument("--peer-python", default=None, help="an interpreter with pure-ldp 1.2.0 (none: ldpsim only)")
    parser.add_argument("--cms-hashes", type=int, default=256, help="pure-ldp's CMS (and ldpsim SFP's): hash functions")
    parser.add_argument("--cms-buckets", type=int, default=1024, help="pure-ldp's CMS (and ldpsim SFP's): buckets")
    parser.add_argument("--seed", type=int, default=1, help="the protocols' randomness (the data's is seed 0)")
    parser.add_argument("--ldpsim-sfp", action="store_true", help="run ldpsim's SFP too, where it exists")
    args = parser.parse_args()
    peer_users = min(args.peer_users or args.users, args.users)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    data = zipf(OpenDomain(bits=32), args.users, np.random.default_rng(0), exponent=1.1, support=1 << 16)
    print(
        f"Zipf 1.1 over 2^16 ranks in 2^32 ids; eps {args.eps}; top-{args.k}; pure-ldp CMS {args.cms_hashes} x {args.cms_buckets}"
    )
    print("| protocol | users | seconds wall / CPU | phases (wall / CPU s) | precision | recall | F1 | freq. error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for protocol in args.protocols:
        sizes = [args.users] + ([peer_users] if args.peer_python and peer_users < args.users else [])
        if protocol != "sfp" or args.ldpsim_sfp:
            for n in sizes:
                sketch = (args.cms_hashes, args.cms_buckets)
                result = ldpsim_run(protocol, data, data.values[:n], args.eps, args.k, args.seed, sketch)
                print(row(f"ldpsim {protocol}", n, result, ["sample", "estimate"]), flush=True)
        elif protocol == "sfp":
            print("| ldpsim sfp | | not run (pass --ldpsim-sfp) | | | | | |")
        if args.peer_python:
            values = data.values[:peer_users]
            result = peer_run(
                args.peer_python, protocol, values, data, args.eps, args.k, args.cms_hashes, args.cms_buckets, args.seed
            )
            note = ""
            if "skipped" not in result and peer_users < args.users:
                factor = args.users / peer_users
                scaled = sum(result[p][0] for p in ("client", "aggregate")) * factor
                note = f"; client + aggregate scaled to {args.users:,} users: {scaled:.0f} s wall"
            if result.get("invalid"):
                note += f"; {result['invalid']} found strings hold padding"
            print(
                row(f"pure-ldp {protocol} (CMS)", peer_users, result, ["client", "aggregate", "estimate"], note),
                flush=True,
            )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
