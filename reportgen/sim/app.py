"""The simulator's application (``serve``): its routes and API key, the start-up it
waits out before it says ready (across nodes with ``--nnodes``), and the shutdown on a signal
that aborts the requests still in flight."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Awaitable, Callable

from reportgen.sim import nodes
from reportgen.sim.http import Request, Response, Server, json_response
from reportgen.sim.server import _Sim


async def serve(args: argparse.Namespace) -> int:
    if args.fault == "exit-at-start":
        print("sim: fault: exiting before listening (--fault exit-at-start)", flush=True)
        return 1
    wrong = nodes.check(args)
    if wrong is not None:
        print(f"sim: error: {wrong}", flush=True)
        return 2
    if args.node_rank > 0:
        return await nodes.follow(args)
    sim = _Sim(args)

    routes: dict[tuple[str, str], Callable[[Request], Awaitable[Response | None]]] = {
        ("GET", "/health"): sim.health,
        ("GET", "/v1/models"): sim.models,
        ("GET", "/version"): sim.version,
        ("GET", "/metrics"): sim.metrics,
        ("POST", "/v1/completions"): sim.completions,
        ("POST", "/v1/chat/completions"): sim.chat,
    }
    paths = {path for _, path in routes}

    async def handle(request: Request) -> Response | None:
        guarded = args.api_key and request.path.startswith("/v1/")
        if guarded and request.headers.get("authorization") != f"Bearer {args.api_key}":
            return json_response({"error": "Unauthorized"}, status=401)
        route = routes.get((request.method, request.path))
        if route is None:
            known = request.path in paths
            return json_response({"detail": "Method Not Allowed" if known else "Not Found"},
                                 status=405 if known else 404)  # fmt: skip
        return await route(request)

    # No access log: at 1024 concurrent streams it costs more than the simulated work.
    server = Server(handle)
    try:
        await server.listen(args.host, args.port, backlog=4096)
    except OSError as exc:
        print(f"sim: cannot listen on {args.host}:{args.port}: {exc}", flush=True)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    head = nodes.Head(args, stop) if args.nnodes > 1 else None
    if head is not None and (said := await head.start()) is not None:
        print(said, flush=True)
        await server.close()
        return 1

    async def load() -> None:  # socket already listens; /health says 503 until "loaded"
        startup = args.startup_s + sim.load_compiled()
        if startup > 0:
            await asyncio.sleep(startup)
        if head is not None and not await head.wait_all():
            return
        sim.ready = True
        across = f" across {args.nnodes} nodes" if head is not None else ""
        print(f"sim: ready on http://{args.host}:{args.port}{across}", flush=True)

    loader = asyncio.create_task(load())
    await stop.wait()
    loader.cancel()
    if head is not None:
        await head.close()
    # the requests in flight are aborted at once (as real engines do), not waited for
    print(f"sim: shutting down, aborting {len(server.handlers)} in-flight requests", flush=True)
    await server.close()
    if sim.sends_log is not None:  # None first: a handler still unwinding must not write
        log, sim.sends_log = sim.sends_log, None
        log.close()
    return 1 if head is not None and head.failed else 0
