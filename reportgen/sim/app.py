"""The simulator's aiohttp application (``serve``): its routes and API key, the start-up it
waits out before it says ready (across nodes with ``--nnodes``), and the shutdown on a signal
that aborts the requests still in flight."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Awaitable, Callable

from aiohttp import web

from reportgen.sim import nodes
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

    @web.middleware
    async def auth(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        guarded = args.api_key and request.path.startswith("/v1/")
        if guarded and request.headers.get("Authorization") != f"Bearer {args.api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    app = web.Application(
        client_max_size=64 * 1024 * 1024,  # long prompts: up to 64 MiB bodies
        middlewares=[auth],
    )
    app.add_routes(
        [
            web.get("/health", sim.health),
            web.get("/v1/models", sim.models),
            web.get("/version", sim.version),
            web.get("/metrics", sim.metrics),
            web.post("/v1/completions", sim.completions),
            web.post("/v1/chat/completions", sim.chat),
        ]
    )
    # No access log: at 1024 concurrent streams it costs more than the simulated work.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, args.host, args.port, backlog=4096).start()
    except OSError as exc:
        print(f"sim: cannot listen on {args.host}:{args.port}: {exc}", flush=True)
        await runner.cleanup()
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    head = nodes.Head(args, stop) if args.nnodes > 1 else None
    if head is not None and (said := await head.start()) is not None:
        print(said, flush=True)
        await runner.cleanup()
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
    print(f"sim: shutting down, aborting {len(sim.handlers)} in-flight requests", flush=True)
    for task in list(sim.handlers):
        task.cancel()
    await runner.cleanup()
    if sim.sends_log is not None:  # None first: a handler still unwinding must not write
        log, sim.sends_log = sim.sends_log, None
        log.close()
    return 1 if head is not None and head.failed else 0
