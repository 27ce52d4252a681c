"""Labeling throughput against a local OpenAI-compatible server answering after 200 ms.

The server runs in a separate process (its own GIL); the client is the real litellm path with
the on-disk cache. Target: >= 100 calls/s on 2 cores with concurrency >= 32.

    python perf/label_bench.py [--sessions 300] [--concurrency 64] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path


def _serve(latency: float, queue) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
    from llm_stub import StubLLMServer

    server = StubLLMServer(latency=latency).start()
    queue.put(server.url)
    while True:
        time.sleep(3600)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()

    queue = mp.Queue()
    proc = mp.Process(target=_serve, args=(args.latency, queue), daemon=True)
    proc.start()
    url = queue.get(timeout=30)
    try:
        from pulse_ml.llm.cache import DiskCache
        from pulse_ml.llm.config import LLMConfig
        from pulse_ml.llm.labeler import label_sessions

        cfg = LLMConfig(name="bench", model="openai/bench", api_base=url,
                        concurrency=args.concurrency, timeout=30, retries=1)
        warm = [json.dumps([{"role": "user", "text": "warm-up"}])]
        with tempfile.TemporaryDirectory() as tmp:
            label_sessions(warm, cfg, None, progress=False)  # litellm's one-time setup
            transcripts = [json.dumps([{"role": "user", "text": f"please fix bug {i}"},
                                       {"role": "agent", "text": "done"}])
                           for i in range(args.sessions)]
            start = time.perf_counter()
            frame, usage = label_sessions(transcripts, cfg, DiskCache(Path(tmp) / "c"),
                                          progress=False)
            elapsed = time.perf_counter() - start
            start = time.perf_counter()
            label_sessions(transcripts, cfg, DiskCache(Path(tmp) / "c"), progress=False)
            cached_elapsed = time.perf_counter() - start
        calls = usage.calls
        print(f"{calls} calls ({args.sessions} sessions x 2 prompts), concurrency "
              f"{args.concurrency}, server latency {args.latency * 1000:.0f} ms: "
              f"{elapsed:.2f} s -> {calls / elapsed:.1f} calls/s "
              f"(ideal {args.concurrency / args.latency:.0f}/s); missing {usage.missing}")
        print(f"rerun from cache: {cached_elapsed:.2f} s -> {calls / cached_elapsed:.0f} "
              f"answers/s, 0 calls")
    finally:
        proc.terminate()
        proc.join()


if __name__ == "__main__":
    main()
