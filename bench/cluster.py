"""Scale-out on loopback: sessions over workers behind the gateway, then a failure drill.

Starts redis-server, W workers (`python -m rtc_server --role worker`), the gateway and, in
agent mode with `--llm shared`, one OpenAI-compatible LLM server (llama_cpp.server) that all
workers use; with `--llm own` each worker loads its own model. Then:
1. **Offer latency** (`--offers N`, 0: skipped): offers alternately through the gateway and
   straight to a worker's `/cluster/offer` (signed by the bench, which knows the cluster
   secret): the HTTP round trip only, so the difference is what the gateway adds (directory
   read, reservation script, one forwarding hop).
2. **Sessions**: S loopback peers connect through the gateway (all of them before anyone
   speaks); each asks `--questions` spoken questions while every session's video keeps
   streaming (testkit/conversation.py): after a random 0-1 s pause, or with `--together`
   question k of every session at t0 + k * `--round-s` (a session still hearing its previous
   answer then asks when it is over: counted as late). `--client-processes N` splits the
   peers over N processes of their own (bench/cluster_clients.py; one process's GIL would
   cap the peers' video decode).
   Per answer: voice-to-voice = end of the peer's speech -> first loud answer audio received
   (aiortc's 80 ms receiver hold removed) and the turn's `timings` marks per stage (the stage
   whose time grows with the sessions is the first bottleneck); per session: received video
   fps and the worst one-second window. Meanwhile, once a second (testkit/utilisation.py): CPU
   of all cores, each worker's and client process's cores, GPU SM % and memory (nvidia-smi).
3. **Failure drill** (`--drill`, peers in this process only): with all sessions up and speech
   going on, one worker is killed (SIGKILL). Reported: when new offers succeed again, how soon
   the directory drops the worker, the survivors' fps before/after, and when the killed
   worker's peers see their media stop and their connection fail (aiortc's ICE consent check
   takes up to ~30 s).

    unshare -n sh -c 'ip link set lo up && exec .venv/bin/python bench/cluster.py \\
        [--sessions 8] [--workers 2] [--mode echo|agent] [--llm shared|own] [--drill] \\
        [--client-processes 2] [--together] [--offers 0]'

The workers' TOML is `--config` (a profile such as config/gpu.toml; none: the defaults) with
the bench's keys over it (rtc_server.config_toml.merged_toml): mode, max_sessions =
ceil(S / W) + 2 (so the profile's own limit never refuses the bench's sessions), loopback ICE,
video size, no greeting, a fixed seed. `--llm own` uses the profile's [llm]; `--llm-model`,
`--forced-answers` and `--asr-model` set [llm] model, [llm] forced_answers and [asr] model,
as in bench/voice_to_voice.py's GPU mode.

On the GPU machine bench/gpu_workers.sh runs it (32 sessions asking together, workers pinned,
under bench/gpu_device.sh; bench/RESULTS.md, section gpu, has the command).

`--log-dir` keeps the cluster's logs (each worker's, the gateway's, redis's) where the run's
results go (default: a new temporary directory, named in the output); `--worker-log-level
INFO` makes the workers say what each session heard and did (WARNING by default).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import platform
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from aiortc import RTCConfiguration, RTCPeerConnection

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cluster_clients import (  # noqa: E402
    RESULT,
    client_part,
    schedule_message,
    start_clients,
)
from bench.cluster_drill import drill, drill_table  # noqa: E402
from bench.server_process import add_profile_options, profile_keys  # noqa: E402
from bench.stats import pct, publish  # noqa: E402
from bench.turn_marks import Row, mark_rows  # noqa: E402
from common.logs import setup_logging  # noqa: E402
from rtc_server.cluster.local import (  # noqa: E402
    RunningCluster,
    default_gguf,
    free_port,
    llama_server_argv,
    pin_here,
    run_cluster,
    shared_llm_keys,
    start_llm_server,
)
from rtc_server.cluster.mps import mps_server  # noqa: E402
from rtc_server.cluster.signing import TOKEN_HEADER, request_token  # noqa: E402
from rtc_server.config_toml import Table, merged_toml  # noqa: E402
from rtc_server.ice import restrict_host_candidates_to_loopback  # noqa: E402
from testkit.conversation import (  # noqa: E402
    QUESTIONS,
    Record,
    Schedule,
    close_peers,
    connect_peers,
    merge,
    speech_of,
    talk,
)
from testkit.marks import SLOW_END_MS, hearing_note, slow_ends, slowest_steps  # noqa: E402
from testkit.utilisation import Sampler, summary_rows  # noqa: E402

log = logging.getLogger("bench")
SECRET = "bench-cluster-secret"
SHOWN_SLOW_ENDS = 8  # of the ends of turn over SLOW_END_MS, the slowest listed with evidence
START_MARGIN_S = 1.0  # from the barrier to t0: every process has the schedule by then


def worker_toml(args: argparse.Namespace, llm: Table) -> str:
    """The workers' (and gateway's) config: the profile, the bench's keys over it."""
    # room for the drill's new offers; over the profile's own max_sessions (gpu.toml: 16)
    capacity = math.ceil(args.sessions / args.workers) + 2
    _, asr = profile_keys(args)
    sections: dict[str, Table] = {
        "server": {"mode": args.mode, "max_sessions": capacity,
                   "log_level": args.worker_log_level},
        "ice": {"loopback_only": True},
        "media": {"width": args.width, "height": args.height, "fps": args.fps},
        "agent": {"greeting": ""},
        "llm": {"seed": 1234, "temperature": 0.0, **llm},
    }
    if asr:
        sections["asr"] = asr
    return merged_toml(sections, args.config)


async def llm_keys(args: argparse.Namespace, stack: AsyncExitStack, log_dir: Path) -> Table:
    """The workers' [llm] keys; with `--llm shared` in agent mode, the server they share
    (started here, stopped with `stack`)."""
    if args.mode == "agent" and args.llm == "shared":
        port = free_port()
        model = args.llm_model or default_gguf()
        server = await start_llm_server(log_dir, llama_server_argv(model, port,
                                                                   args.llm_threads))
        stack.push_async_callback(server.stop)
        return shared_llm_keys(f"http://127.0.0.1:{port}/v1")
    llm, _ = profile_keys(args)
    return llm if args.mode == "agent" else {}


async def offer_latency(cluster: RunningCluster, n: int, sdp: str) -> dict[str, list[float]]:
    """Round trips of the same offer through the gateway and straight to a worker (ms)."""
    out: dict[str, list[float]] = {"gateway": [], "direct": []}
    worker_url = cluster.workers[0][1]
    worker_id = cluster.workers[0][0].ready_line.split()[2]
    body = json.dumps({"sdp": sdp, "type": "offer"}).encode()
    async with aiohttp.ClientSession() as http:
        for i in range(2 * n):
            via = "gateway" if i % 2 == 0 else "direct"
            if via == "gateway":
                url, headers, session_id = cluster.url + "/api/offer", {}, ""
            else:
                session_id = f"bench-direct-{i}"
                token = request_token(SECRET, "offer", worker_id, session_id, 10)
                url, headers = worker_url + "/cluster/offer", {TOKEN_HEADER: token}
            headers["Content-Type"] = "application/json"
            start = time.perf_counter()
            async with http.post(url, data=body, headers=headers) as resp:
                answer = await resp.json()
                assert resp.status == 200, answer
            out[via].append((time.perf_counter() - start) * 1000)
            if via == "gateway":
                async with http.delete(f"{cluster.url}/api/sessions/{answer['session_id']}"):
                    pass
            else:
                token = request_token(SECRET, "delete", worker_id, session_id, 10)
                async with http.delete(f"{worker_url}/cluster/sessions/{session_id}",
                                       headers={TOKEN_HEADER: token}):
                    pass
    return out


def monitored(cluster: RunningCluster, clients: dict[str, int]) -> dict[str, int]:
    """The processes whose CPU is sampled: workers, gateway, the peers' processes."""
    out = {child.name: child.pid for child, _ in cluster.workers}
    return {**out, "gateway": cluster.gateway.pid, **clients}


async def sessions_in_processes(
    cluster: RunningCluster, args: argparse.Namespace
) -> dict[str, Any]:
    """The conversation with the peers split over client processes."""
    clients = await start_clients(cluster.url, args.sessions, args.client_processes,
                                  args.questions, args.timeout)
    try:
        log.info("%d sessions up in %d client processes: %s", args.sessions, len(clients),
                 sorted(w for c in clients for w in c.workers))
        schedule = Schedule(time.time() + START_MARGIN_S, args.together, args.round_s)
        for client in clients:  # the barrier: every peer is up; here is the start
            client.send(schedule_message(schedule))
        pids = {f"client{i}": c.process.pid for i, c in enumerate(clients)}
        await asyncio.sleep(max(0.0, schedule.t0 - time.time()))
        async with Sampler(monitored(cluster, pids)) as sampler:
            limit = args.questions * (args.timeout + args.round_s) + 60
            parts = await asyncio.gather(*(c.line(RESULT, limit) for c in clients))
        return {**merge(parts), "utilisation": sampler.summary()}
    finally:
        await asyncio.gather(*(c.stop() for c in clients), return_exceptions=True)


async def sessions_here(
    cluster: RunningCluster, args: argparse.Namespace, sdp: str
) -> dict[str, Any]:
    """The conversation (and the drill) with every peer in this process."""
    peers = await connect_peers(cluster.url, args.sessions)
    try:
        log.info("%d sessions up: %s", len(peers), sorted(p.answer["worker_id"] for p in peers))
        schedule = Schedule(time.time() + START_MARGIN_S, args.together, args.round_s)
        await asyncio.sleep(max(0.0, schedule.t0 - time.time()))
        async with Sampler(monitored(cluster, {"bench": os.getpid()})) as sampler:
            out: dict[str, Any] = dict(await talk(peers, 0, args.questions, args.timeout,
                                                  schedule))
        out["utilisation"] = sampler.summary()
        if args.drill:
            out["drill"] = await drill(cluster, peers, sdp)
        return out
    finally:
        await close_peers(peers)


async def probe_sdp() -> str:
    """One offer's SDP (audio sendrecv, video recvonly), reused by the offers and the drill."""
    probe = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    probe.addTransceiver("audio")
    probe.addTransceiver("video", direction="recvonly")
    await probe.setLocalDescription(await probe.createOffer())
    sdp: str = probe.localDescription.sdp
    await probe.close()
    return sdp


async def run(args: argparse.Namespace) -> dict[str, Any]:
    restrict_host_candidates_to_loopback()
    if args.client_processes <= 1:
        for question in QUESTIONS:  # the voice loads once, before any peer's media is running
            speech_of(question)
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="bench-cluster-"))
    worker_cpus: list[frozenset[int]] = []
    if args.pin_workers:  # each worker on its own cores; this process and its children the rest
        worker_cpus, rest = pin_here(args.workers)
        log.info("workers pinned to %s; gateway, redis and peers to %s",
                 [sorted(g) for g in worker_cpus], sorted(rest))
    async with AsyncExitStack() as stack:
        llm = await llm_keys(args, stack, log_dir)
        config_path = log_dir / "cluster.toml"
        config_path.write_text(worker_toml(args, llm))
        worker_env = (await stack.enter_async_context(
            mps_server(Path(tempfile.mkdtemp(prefix="rtc-mps-")))) if args.mps else None)
        cluster = await stack.enter_async_context(run_cluster(
            log_dir, config_path, SECRET, workers=args.workers, redis_server=args.redis_server,
            worker_cpus=worker_cpus, worker_env=worker_env))
        log.info("cluster up (logs in %s)", log_dir)
        sdp = await probe_sdp() if args.offers or args.drill else ""
        results: dict[str, Any] = {"offers": await offer_latency(cluster, args.offers, sdp)}
        if args.client_processes > 1:
            results.update(await sessions_in_processes(cluster, args))
        else:
            results.update(await sessions_here(cluster, args, sdp))
    return results


def _finite(values: list[float]) -> list[float]:
    return [v for v in values if np.isfinite(v)]


def session_rows(results: dict[str, Any], args: argparse.Namespace) -> tuple[list[Row], str]:
    """Voice-to-voice, the turn's stages, fps; and a note on lateness and placement."""
    answers: list[Record] = results["answers"]
    v2v = _finite([a["v2v_s"] * 1000 for a in answers])
    fps = [s["fps"] for s in results["sessions"]]
    worst = [s["worst_1s"] for s in results["sessions"]]
    rows: list[Row] = [
        (f"voice-to-voice ({args.mode}, {len(v2v)}/{len(answers)} answered in time), ms",
         f"{pct(v2v, 0.5):.0f}", f"{pct(v2v, 0.95):.0f}"),
        *(row for row in mark_rows([a["marks_ms"] for a in answers]) if row[1] != "nan"),
        (f"received video fps per session ({len(fps)} sessions; p5 for p95)",
         f"{pct(fps, 0.5):.1f}", f"{pct(fps, 0.05):.1f}"),
        ("worst 1 s window per session, frames (p5 for p95)", f"{pct(worst, 0.5):.0f}",
         f"{pct(worst, 0.05):.0f}"),
    ]
    late = [a["late_s"] for a in answers if a["late_s"] > 0.05]
    per_worker: dict[str, int] = {}
    for s in results["sessions"]:
        per_worker[str(s["worker"])] = per_worker.get(str(s["worker"]), 0) + 1
    note = ("Asked " + (f"together, a round every {args.round_s:.0f} s; late (the previous "
                        f"answer ran past the round's start): {len(late)}/{len(answers)}"
                        + (f", up to {max(late):.1f} s" if late else "")
                        if args.together else "after a random 0-1 s pause each")
            + f". Sessions per worker: {', '.join(f'{n}' for n in per_worker.values())}; "
            f"fps min {min(fps, default=float('nan')):.1f}.")
    return rows, note


def _table(header: tuple[str, str, str], rows: list[Row]) -> list[str]:
    return [f"| {' | '.join(header)} |", "| --- | --- | --- |",
            *(f"| {a} | {b} | {c} |" for a, b, c in rows)]


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    command = " ".join(sys.argv[1:])
    lines = [
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()} {args.machine}, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end, "
        f"`bench/cluster.py {command}`",
        "",
    ]
    rows: list[Row] = []
    gw, direct = results["offers"]["gateway"], results["offers"]["direct"]
    if gw:
        rows += [
            ("offer through the gateway, ms", f"{pct(gw, 0.5):.1f}", f"{pct(gw, 0.95):.1f}"),
            ("offer straight to the worker, ms", f"{pct(direct, 0.5):.1f}",
             f"{pct(direct, 0.95):.1f}"),
            ("added by the gateway, ms", f"{pct(gw, 0.5) - pct(direct, 0.5):.1f}",
             f"{pct(gw, 0.95) - pct(direct, 0.95):.1f}"),
        ]
    talk_rows, note = session_rows(results, args)
    lines += _table(("metric", "p50", "p95"), rows + talk_rows)
    lines += ["", note, ""]
    u = results["utilisation"]
    lines += _table((f"utilisation over the conversation ({u['wall_s']:.0f} s, 1 s samples)",
                     "p50", "max"), summary_rows(u))
    threshold, n, steps = slowest_steps([(a["v2v_s"] * 1000, a["marks_ms"])
                                         for a in results["answers"]
                                         if np.isfinite(a["v2v_s"])])
    if steps:
        lines += ["", *_table((f"where the slowest tenth's time goes ({n} answers at >= "
                               f"{threshold:.0f} ms), median ms", "slowest", "the rest"),
                              [(name, f"{a:.0f}", f"{b:.0f}") for name, a, b in steps])]
    late = slow_ends(results["answers"])
    if late:
        lines += ["", f"Ends of turn over {SLOW_END_MS} ms ({len(late)}; the slowest "
                  f"{min(len(late), SHOWN_SLOW_ENDS)} shown): " + "; ".join(
                      f"{a['question']!r} {hearing_note(a['marks_ms'], a.get('evidence', {}))}"
                      for a in late[:SHOWN_SLOW_ENDS]) + "."]
    if args.forced_answers:
        lines += ["", "LLM: random weights, timing-equivalent decoding (every step runs the "
                  f"model; the words said are {args.forced_answers}'s)."]
    if "drill" in results:
        lines += ["", *drill_table(results["drill"])]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mode", choices=["echo", "agent"], default="echo")
    parser.add_argument("--llm", choices=["shared", "own"], default="shared")
    add_profile_options(parser, "--llm shared: the shared server's GGUF (default: the bundled "
                        "one); --llm own: llm.model (a GGUF, bundled name or Hugging Face "
                        "directory)")
    parser.add_argument("--llm-threads", type=int, default=1)
    parser.add_argument("--questions", type=int, default=3, help="per session")
    parser.add_argument("--offers", type=int, default=30, help="of each kind (0: skipped)")
    parser.add_argument("--client-processes", type=int, default=1,
                        help="processes the peers are split over (1: this one)")
    parser.add_argument("--together", action="store_true",
                        help="question k of every session at t0 + k * --round-s")
    parser.add_argument("--round-s", type=float, default=20.0)
    parser.add_argument("--redis-server", default="redis-server",
                        help="the redis-server program (name on PATH or path)")
    parser.add_argument("--drill", action="store_true")
    parser.add_argument("--pin-workers", action="store_true",
                        help="each worker on its own cores (rtc_server.cluster.local."
                             "share_cores), the rest for the gateway, redis and the peers")
    parser.add_argument("--mps", action="store_true",
                        help="the workers' CUDA work through one MPS server of their own "
                             "(rtc_server.cluster.mps; a GPU profile's workers on one GPU)")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--height", type=int, default=512)
    parser.add_argument("--fps", type=int, default=25)
    parser.add_argument("--timeout", type=float, default=90.0, help="per answer, s")
    parser.add_argument("--machine", default=f"{os.cpu_count()}-core CPU")
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--log-dir", help="keep the cluster's logs here (default: a temp dir)")
    parser.add_argument("--worker-log-level", default="WARNING",
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="[server] log_level of the workers and the gateway")
    parser.add_argument("--client-part", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.log_dir:
        Path(args.log_dir).mkdir(parents=True, exist_ok=True)
    setup_logging("INFO")
    if args.client_part:  # a client process (bench/cluster_clients.py): stdin/stdout protocol
        return asyncio.run(client_part())
    if args.drill and args.client_processes > 1:
        parser.error("--drill needs the peers in this process (--client-processes 1)")
    if args.forced_answers and not (args.mode == "agent" and args.llm == "own"):
        parser.error("--forced-answers is for --mode agent --llm own (the transformers engine)")
    results = asyncio.run(run(args))
    return publish(report(results, args), results, args.json)


if __name__ == "__main__":
    sys.exit(main())
