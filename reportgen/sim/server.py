"""Simulated OpenAI-compatible LLM inference server (no GPU needed).

Its speed comes only from command-line flags, so two "server configurations" (two flag sets)
have different, predictable performance, the way real engine flags change a real engine.
Used to rehearse benchmark campaigns without a GPU and for the project's demo.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import math
import os
import random
import re
import sys
import time
import traceback
import uuid
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from pathlib import Path
from typing import Any

from reportgen.sim.http import Request, Response, Stream, json_response, text_response
from reportgen.sim.speed import start_speed
from reportgen.sim.text import BadRequest, generated_tokens, request_prompt

DEFAULT_MAX_TOKENS = 16


DEAD_LOOP_MESSAGE = (
    "CUDA out of memory (simulated). Tried to allocate 6.00 GiB. GPU 0 has a total capacity of "
    "139.80 GiB of which 2.24 GiB is free. Of the allocated memory 136.64 GiB is allocated by "
    "PyTorch, with 15.40 GiB allocated in private pools (e.g., CUDA Graphs): the part of the "
    "message past its first 300 characters that says where the memory went"
)


def _dead_generation_loop(note: str) -> None:
    raise RuntimeError(f"{DEAD_LOOP_MESSAGE} ({note})")


def _error(message: str, status: int = 400) -> Response:
    kind = "invalid_request_error" if status == 400 else "service_unavailable"
    return json_response(
        {"error": {"message": message, "type": kind, "param": None, "code": status}}, status=status
    )


SAMPLING = ("temperature", "top_p", "top_k", "min_p", "seed")  # kept by --record-sends


class _Sim:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ready = False
        self.active = 0  # requests being served right now (queued ones excluded)
        # Prometheus counters, named like an engine's ("sim:" as "sglang:" or "vllm:").
        self.counted = {
            "requests": 0,
            "prompt_tokens": 0,
            "generation_tokens": 0,
            "prefix_cache_queries": 0,  # prompt tokens looked up in the prefix cache
            "prefix_cache_hits": 0,  # of those, tokens found there
            "spec_decode_num_drafts": 0,  # decode steps that proposed draft tokens
            "spec_decode_num_draft_tokens": 0,
            "spec_decode_num_accepted_tokens": 0,
        }
        k, rate = args.spec_draft_tokens, min(max(args.spec_accept_rate, 0.0), 1.0)
        self.accept_len = 1 + k * rate  # tokens per decode step
        self.itl_factor = (1 + 0.1 * k) / self.accept_len if k else 1.0
        self.cached_blocks: set[str] = set()  # chained hashes of the prompts' 16-word blocks
        self.started = 0  # requests accepted since start (for --cold-requests)
        # --compile-ms: batch shapes compiled so far (from --compile-cache at start), and the
        # loop time until which a compilation holds every stream
        self.compiled: set[int] = set()
        self.stall_until = 0.0
        self.slump: tuple[float, float] | None = None  # --slump-after: from, until (monotonic)
        self.streamed = 0  # streamed requests received (for --fault-after)
        self.dead = False  # --fault dead-loop: the generation loop has died
        self.noise = random.Random(args.seed)
        self.speed = start_speed(args)  # --start-spread and --drift: this start's own
        # Lognormal with mean 1 and relative sd `jitter`: sigma^2 = ln(1 + jitter^2).
        self.sigma = math.sqrt(math.log1p(args.jitter**2))
        self.slots = (
            asyncio.Semaphore(args.max_running_requests) if args.max_running_requests > 0 else None
        )
        # Send log (--record-sends): one line per finished request, buffered, closed on shutdown.
        self.sends_log = open(args.record_sends, "a") if args.record_sends else None  # noqa: SIM115

    def record_sends(
        self,
        request_id: str,
        prompt: str,
        t_recv: float,
        sends: list[float],
        body: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if self.sends_log is not None:
            line = {"request_id": request_id, "prompt": prompt[:64], "t_recv": t_recv}
            # the sampling fields and x- headers the request came with (what a client sends)
            asked = {k: v for k, v in (body or {}).items() if k in SAMPLING}
            extra = {k.lower(): v for k, v in (headers or {}).items() if k.lower().startswith("x-")}
            extra.pop("x-sim-request-id", None)
            said = {**line, "sends": sends, "sampling": asked, "headers": extra}
            self.sends_log.write(json.dumps(said) + "\n")

    def delay_s(self, base_ms: float, growth: float, tokens: int = 1, cold: float = 1.0) -> float:
        """Delay in seconds for `tokens` tokens, given the load at this moment."""
        if base_ms == 0:
            return 0.0
        d = base_ms / 1000 * tokens * (1 + growth * max(self.active - 1, 0)) * cold * self.speed
        if self.slump is not None and self.slump[0] <= time.monotonic() < self.slump[1]:
            d *= self.args.slump_factor
        if self.sigma > 0:
            d *= self.noise.lognormvariate(-(self.sigma**2) / 2, self.sigma)
        return d

    def load_compiled(self) -> float:
        """The batch shapes --compile-cache holds (seconds it takes to load them)."""
        cache = self.args.compile_cache
        if not self.args.compile_ms or not cache:
            return 0.0
        folder = Path(cache)
        folder.mkdir(parents=True, exist_ok=True)
        for f in folder.glob("shape-*"):
            with contextlib.suppress(ValueError):
                self.compiled.add(int(f.name.split("-", 1)[1]))
        return len(self.compiled) * float(self.args.compile_ms) / 1000 / 20

    def compile_gate(self, now: float) -> float:
        """When the next step may run: after a compilation for the batch shape the running
        requests make now, if it was never compiled (--compile-ms)."""
        if not self.args.compile_ms or self.active < 1:
            return self.stall_until
        shape = 1 << (self.active - 1).bit_length()  # 1, 2, 4, 8, ...
        if shape not in self.compiled:
            self.compiled.add(shape)
            self.stall_until = max(self.stall_until, now) + self.args.compile_ms / 1000
            stamp = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
            print(
                f"[{stamp}] sim: WARNING Triton kernel JIT compilation during inference: "
                f"batch shape {shape}. This causes a latency spike; consider extending warmup "
                "to cover this shape/config.",
                flush=True,
            )
            if self.args.compile_cache:
                with contextlib.suppress(OSError):
                    (Path(self.args.compile_cache) / f"shape-{shape}").touch()
        return self.stall_until

    def text(self, prompt: str, n: int) -> tuple[list[str], str]:
        """The answer's tokens and finish reason. A prompt with a line "Repeat after me: X"
        is answered with X's words and stops there, as a model following it would; anything
        else gets ``n`` pseudo-words. ``--repeat-after`` then breaks it."""
        m = re.search(r"Repeat after me:[ \t]*(.*)", prompt)
        if m and m.group(1).split():
            tokens, finish = [" " + w for w in m.group(1).split()][:n], "stop"
        else:
            tokens, finish = generated_tokens(self.args.seed, prompt, n), "length"
        if self.args.repeat_after:  # a loop until the length limit, whatever was asked
            head = tokens[: self.args.repeat_after]
            tokens, finish = head + [head[-1]] * (n - len(head)), "length"
        return tokens, finish

    def speculate(self, n: int) -> None:
        """Count the draft rounds that would make ``n`` tokens, and print the decode line an
        engine with speculative decoding prints (SGLang's "accept len")."""
        k = self.args.spec_draft_tokens
        if not k or n < 2:
            return
        steps = math.ceil((n - 1) / self.accept_len)
        accepted = max(0, n - 1 - steps)
        self.counted["spec_decode_num_drafts"] += steps
        self.counted["spec_decode_num_draft_tokens"] += steps * k
        self.counted["spec_decode_num_accepted_tokens"] += accepted
        print(
            f"Decode batch. #running-req: {self.active + 1}, accept len: {(n - 1) / steps:.2f}",
            flush=True,
        )

    def prefix_cache(self, prompt: str) -> None:
        """Count prompt tokens (words) found in the prefix cache: whole 16-word blocks whose
        prefix was seen before, as a paged engine's radix or hash cache would."""
        words = prompt.split()
        self.counted["prefix_cache_queries"] += len(words)
        chain = hashlib.sha256()
        hit = True
        for k in range(0, len(words) - len(words) % 16, 16):
            chain.update(" ".join(words[k : k + 16]).encode())
            key = chain.hexdigest()
            if hit and key in self.cached_blocks:
                self.counted["prefix_cache_hits"] += 16
            else:
                hit = False
                if len(self.cached_blocks) < 1_000_000:
                    self.cached_blocks.add(key)

    async def generate(self, tokens: list[str], chunk: int) -> AsyncGenerator[str, None]:
        """Yield text pieces on schedule: first after TTFT, then one per `chunk` tokens.

        Sleeps to absolute deadlines so per-chunk overhead does not accumulate, and never
        sleeps when the delay is zero (a zero-work server for load-generator benchmarks).
        """
        if self.slots is not None:
            await self.slots.acquire()  # queue wait happens before the TTFT clock starts
        self.active += 1
        self.started += 1
        if self.args.slump_after and self.started == self.args.slump_after:
            now = time.monotonic()
            self.slump = (now, now + self.args.slump_s)
        cold = 3.0 if self.started <= self.args.cold_requests else 1.0
        # --stall-after: this request pauses halfway and again before its response closes
        stall = self.args.stall_ms / 1000 if self.started == self.args.stall_after else 0.0
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time()
            a = self.args
            for k in range(0, len(tokens), chunk):
                deadline = max(deadline, self.compile_gate(loop.time()))
                if k == 0:
                    deadline += self.delay_s(a.ttft_ms, a.ttft_growth, cold=cold)
                else:  # the load (active count) is sampled as each chunk is scheduled
                    step = min(chunk, len(tokens) - k)
                    deadline += self.delay_s(a.itl_ms * self.itl_factor, a.itl_growth, step, cold)
                    if stall and k == (len(tokens) // chunk // 2) * chunk:
                        deadline += stall
                if deadline > loop.time():
                    await asyncio.sleep(deadline - loop.time())
                yield "".join(tokens[k : k + chunk])
            if stall:
                await asyncio.sleep(stall)  # the response stays open after its last token
        finally:
            self.active -= 1
            if self.slots is not None:
                self.slots.release()

    async def health(self, request: Request) -> Response:
        if not self.ready or self.args.fault == "never-ready":
            return json_response({"status": "loading"}, status=503)
        return json_response({"status": "ok"})

    async def metrics(self, request: Request) -> Response:
        """Prometheus text format, as engines expose it."""
        lines = []
        for name, value in self.counted.items():
            lines += [f"# TYPE sim:{name}_total counter", f"sim:{name}_total {value}"]
        lines += ["# TYPE sim:num_running_reqs gauge", f"sim:num_running_reqs {self.active}"]
        return text_response("\n".join(lines) + "\n")

    async def version(self, request: Request) -> Response:
        return json_response({"version": self.args.engine_version})

    async def models(self, request: Request) -> Response:
        card = {"id": self.args.model, "object": "model", "created": 0, "owned_by": "reportgen"}
        return json_response({"object": "list", "data": [card]})

    async def completions(self, request: Request) -> Response | None:
        return await self._serve(request, chat=False)

    async def chat(self, request: Request) -> Response | None:
        return await self._serve(request, chat=True)

    async def _serve(self, request: Request, chat: bool) -> Response | None:
        """A completion, whole or streamed (None: streamed, or the client left)."""
        t_recv = time.time()  # wall clock, like the send times in --record-sends
        if not self.ready:
            return _error("model is still loading", status=503)
        if self.args.fault == "dead-loop" and self.streamed >= self.args.fault_after:
            if not self.dead:
                self.dead = True
                note = "simulated fault (--fault dead-loop)"
                print(f"sim: error in generation loop: {note}", flush=True)
                try:  # then its traceback, as transformers serve prints one
                    _dead_generation_loop(note)
                except RuntimeError:
                    traceback.print_exc(file=sys.stdout)
                    sys.stdout.flush()
            return _error("generation loop is not running", status=503)
        try:
            body = request.json()
            if not isinstance(body, dict):
                raise BadRequest("request body must be a JSON object")
            prompt = request_prompt(body, chat)
            n = body.get("max_completion_tokens") if chat else None
            n = body.get("max_tokens") if n is None else n
            n = DEFAULT_MAX_TOKENS if n is None else n
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                raise BadRequest(f"max_tokens must be a positive integer, got {n!r}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return _error(f"malformed JSON body: {exc}")
        except BadRequest as exc:
            return _error(str(exc))
        asked = body.get("model")
        if self.args.strict_model and asked is not None and asked != self.args.model:
            # as vLLM answers a model it does not serve
            return _error(f"The model `{asked}` does not exist.", status=404)

        tokens, finish = self.text(prompt, n)
        usage = {
            "prompt_tokens": len(prompt.split()),
            "completion_tokens": len(tokens),
            "total_tokens": len(prompt.split()) + len(tokens),
        }
        self.counted["requests"] += 1
        self.counted["prompt_tokens"] += usage["prompt_tokens"]
        self.counted["generation_tokens"] += len(tokens)  # (as scheduled: counted when accepted)
        self.prefix_cache(prompt)
        self.speculate(len(tokens))
        head = {
            "id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.args.model,
        }
        id_header = {"x-sim-request-id": head["id"]}
        if not body.get("stream"):
            async with aclosing(self.generate(tokens, self.args.tokens_per_chunk)) as gen:
                text = "".join([piece async for piece in gen])  # same total time as a stream
            choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            self.record_sends(head["id"], prompt, t_recv, [time.time()], body, request.headers)
            return json_response({**head, "choices": [choice], "usage": usage}, headers=id_header)

        self.streamed += 1
        fault = self.args.fault if self.streamed > self.args.fault_after else None
        if fault == "exit":
            print("sim: fault: exiting mid-run (--fault exit)", flush=True)
            os._exit(3)
        if fault in ("http-400", "http-429", "http-500"):
            status = int(fault[5:])
            resp_err = _error(f"simulated fault: HTTP {status}", status=status)
            if status == 429:
                resp_err.headers["Retry-After"] = "1"
            return resp_err
        opts = body.get("stream_options")
        include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
        head["object"] = "chat.completion.chunk" if chat else "text_completion"
        try:
            resp = await request.stream(
                {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **id_header}
            )
        except ConnectionResetError:  # the client left before its headers went out (a level
            return None  # that ended, a timed-out probe): not the server's error, no traceback

        async def send(choices: list[dict[str, Any]], **extra: Any) -> None:
            if include_usage and "usage" not in extra:
                extra["usage"] = None  # OpenAI sends usage: null on every chunk but the last
            payload = json.dumps({**head, "choices": choices, **extra}, separators=(",", ":"))
            await resp.write(f"data: {payload}\n\n".encode())

        sends: list[float] = []  # wall-clock time each output chunk was handed to the transport
        try:
            if chat:  # OpenAI opens every chat stream with an empty assistant-role delta
                await send(
                    [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": ""},
                            "logprobs": None,
                            "finish_reason": None,
                        }
                    ]
                )
            if fault == "bad-sse":
                await resp.write(b"<html><body>502 Bad Gateway</body></html>\n")
                await resp.end()
                return None
            sent = 0
            # aclosing: if the client leaves, free the slot now rather than at garbage collection
            async with aclosing(self.generate(tokens, self.args.tokens_per_chunk)) as gen:
                async for piece in gen:
                    if fault and sent >= 2 * self.args.tokens_per_chunk:
                        await self._fault_mid_stream(fault, resp)
                        return None
                    sent += self.args.tokens_per_chunk
                    choice = {
                        "index": 0,
                        "logprobs": None,
                        "finish_reason": finish if sent >= len(tokens) else None,
                    }
                    choice.update({"delta": {"content": piece}} if chat else {"text": piece})
                    await send([choice])
                    if self.sends_log is not None:
                        sends.append(time.time())
            if include_usage:
                await send([], usage=usage)
            await resp.write(b"data: [DONE]\n\n")
            await resp.end()
        except ConnectionResetError:
            pass  # client went away mid-stream; generate()'s finally frees the slot
        finally:
            self.record_sends(head["id"], prompt, t_recv, sends, body, request.headers)
        return None

    async def _fault_mid_stream(self, fault: str, resp: Stream) -> None:
        """After two chunks of a stream: the fault (--fault) instead of the rest."""
        if fault == "hang":
            print("sim: fault: stream hung (--fault hang)", flush=True)
            await asyncio.sleep(3600)
        elif fault == "bad-json":
            await resp.write(b'data: {"choices": [{"delta": oops}\n\n')
            await resp.write(b"data: [DONE]\n\n")
            await resp.end()
        elif fault == "drop":
            print("sim: fault: connection dropped (--fault drop)", flush=True)
            resp.abort()
        elif fault == "error-in-stream":
            err = {"error": {"message": "simulated fault: CUDA out of memory", "code": 500}}
            await resp.write(f"data: {json.dumps(err)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            await resp.end()
