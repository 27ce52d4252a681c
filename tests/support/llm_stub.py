"""A scripted OpenAI-compatible chat server on 127.0.0.1 for tests, benchmarks and demos.

It answers ``POST /v1/chat/completions`` with canned answers per prompt type (or a custom
``responder``), and counts calls and the largest number of requests in flight.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """What the server sends back.

    Attributes:
        status: HTTP status (200, 429, 500 ...).
        text: Assistant message content (for status 200).
        raw: Raw body instead of a chat completion (garbage tests).
        delay: Extra seconds before answering.
        drop: Close the connection without any answer.
        dribble: Seconds between the bytes of the body (a server that answers ever so slowly:
            each read gets a byte in time, so only a bound on the whole call stops it).
    """

    status: int = 200
    text: str = ""
    raw: str | None = None
    delay: float = 0.0
    drop: bool = False
    dribble: float = 0.0


SENTIMENT_ANSWER = ('{"task_description": "Build a tool", "sentiment": {"classification": '
                    '"Positive", "explanation": "thanks", "example_messages": ["thanks"]}, '
                    '"task_type": "Implement Features", "development_cluster": ["Testing code"]}')
FAILURE_ANSWER = json.dumps({k: {"answer": "NO", "explanation": "none"} for k in (
    "misunderstood_intention", "did_not_follow_instruction", "insufficient_analysis",
    "insufficient_testing", "insufficient_debugging", "incomplete_implementation")}
    | {"scope_creep": {"answer": "YES", "explanation": "added extras"}})
JUDGE_ANSWER = '{"binary_satisfied": true, "likert_score": 4, "explanation": "fine"}'
DISCOVERY_ANSWER = json.dumps({"features": [
    {"name": "User frustration", "definition": "negative tone", "value_type": "binary",
     "polarity": "dissatisfaction"},
    {"name": "git_push", "definition": "code pushed", "value_type": "binary",
     "polarity": "satisfaction"}], "overall_guidance": "use them"})


def prompt_kind(prompt: str) -> str:
    """Which of the paper's prompts ``prompt`` is (sentiment / failure / judge / discovery)."""
    if "Classify the overall sentiment" in prompt:
        return "sentiment"
    if "For each issue item below" in prompt:
        return "failure"
    if "propose 10 general" in prompt:
        return "discovery"
    if "determine user satisfaction" in prompt:
        return "judge"
    return "other"


CANNED = {"sentiment": SENTIMENT_ANSWER, "failure": FAILURE_ANSWER, "judge": JUDGE_ANSWER,
          "discovery": DISCOVERY_ANSWER, "other": "{}"}


def canned(request: dict, n: int) -> Reply:
    """Default responder: the canned answer of the prompt's kind."""
    return Reply(text=CANNED[prompt_kind(last_prompt(request))])


def last_prompt(request: dict) -> str:
    """The text of the last message of a chat request."""
    msgs = request.get("messages") or [{}]
    content = msgs[-1].get("content", "")
    return content if isinstance(content, str) else json.dumps(content)


class StubLLMServer:
    """Threaded OpenAI-compatible server.

    Args:
        responder: ``(request_json, call_number) -> Reply`` (default: :func:`canned`).
        latency: Seconds every answer waits (on top of ``Reply.delay``).

    Attributes:
        calls: Requests received. ``max_in_flight``: largest concurrency seen.
        prompts: The last prompt of every request, in arrival order.
    """

    def __init__(self, responder: Callable[[dict, int], Reply] | None = None,
                 latency: float = 0.0):
        self.responder = responder or canned
        self.latency = latency
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.prompts: list[str] = []
        self.dead = False
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL to pass as ``api_base``."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def reset_counters(self) -> None:
        """Zero the call counter and the concurrency gauge."""
        with self._lock:
            self.calls = 0
            self.max_in_flight = 0
            self.prompts.clear()

    def start(self) -> StubLLMServer:
        """Start serving on an ephemeral port in a daemon thread."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # silence
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                if server.dead:
                    self.close_connection = True
                    return
                try:
                    request = json.loads(body or b"{}")
                except ValueError:
                    request = {}
                with server._lock:
                    server.calls += 1
                    n = server.calls
                    server.prompts.append(last_prompt(request))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    reply = server.responder(request, n)
                    wait = server.latency + reply.delay
                    if wait > 0:
                        time.sleep(wait)
                    if reply.drop or server.dead:
                        self.close_connection = True
                        return
                    self._send(reply, request)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, reply: Reply, request: dict) -> None:
                if reply.raw is not None:
                    payload = reply.raw.encode()
                elif reply.status != 200:
                    payload = json.dumps({"error": {"message": f"stub error {reply.status}",
                                                    "type": "server_error"}}).encode()
                else:
                    prompt = last_prompt(request)
                    t_in, t_out = max(len(prompt) // 4, 1), max(len(reply.text) // 4, 1)
                    payload = json.dumps({
                        "id": "chatcmpl-stub", "object": "chat.completion",
                        "created": int(time.time()), "model": request.get("model", "stub"),
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {
                            "role": "assistant", "content": reply.text}}],
                        "usage": {"prompt_tokens": t_in, "completion_tokens": t_out,
                                  "total_tokens": t_in + t_out}}).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if reply.dribble <= 0:
                    self.wfile.write(payload)
                    return
                try:
                    for i in range(len(payload)):
                        self.wfile.write(payload[i:i + 1])
                        self.wfile.flush()
                        time.sleep(reply.dribble)
                except OSError:  # the client gave up (its timeout): stop dribbling
                    self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def kill(self) -> None:
        """Make every further request fail at the connection level (a dead server)."""
        self.dead = True

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.dead = True
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> StubLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
