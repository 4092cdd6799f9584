"""The simulator spanning several nodes (``--nnodes``), as SGLang's multi-node launch does.

Rank 0 listens at ``--dist-init-addr`` and is not ready until every other rank has joined;
the other ranks serve no HTTP and hold their connection to rank 0. A rank that leaves ends
rank 0 with an error (a lost NCCL peer aborts a real engine), and rank 0 leaving ends every
other rank, so the launch's failures behave as a real multi-node server's do.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

JOIN_TIMEOUT_S = 60.0  # how long ranks wait for each other (torch.distributed's is longer)
BYE = b"bye\n"  # rank 0's word to the others when it stops on purpose


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the node flags, or None."""
    if not 0 <= args.node_rank < args.nnodes:
        return f"--node-rank must be 0 to {args.nnodes - 1} (--nnodes {args.nnodes}), got " + (
            str(args.node_rank)
        )
    if args.nnodes == 1:
        return None
    host, _, port = str(args.dist_init_addr or "").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return (
            f"--nnodes {args.nnodes} needs --dist-init-addr HOST:PORT (rank 0's address and "
            f"a TCP port), got {args.dist_init_addr!r}"
        )
    return None


def _address(args: argparse.Namespace) -> tuple[str, int]:
    host, _, port = str(args.dist_init_addr).rpartition(":")
    return host.strip("[]"), int(port)


def _on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


async def follow(args: argparse.Namespace) -> int:
    """A rank after 0: join rank 0, then hold until it goes (exit 1) or a signal (exit 0)."""
    stop = asyncio.Event()
    _on_signals(stop)
    host, port = _address(args)
    me = f"sim: node rank {args.node_rank} of {args.nnodes}"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + JOIN_TIMEOUT_S
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            break
        except OSError:
            if stop.is_set():
                return 0
            if loop.time() > deadline:
                print(f"{me}: error: rank 0 not reachable at {host}:{port} within "
                      f"{JOIN_TIMEOUT_S:g} s", flush=True)  # fmt: skip
                return 1
            await asyncio.sleep(0.2)
    writer.write(f"rank {args.node_rank}\n".encode())
    await writer.drain()
    print(f"{me}: joined rank 0 at {host}:{port}; serving no HTTP here", flush=True)
    said = asyncio.create_task(reader.read())
    stopped = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({said, stopped}, return_when=asyncio.FIRST_COMPLETED)
    writer.close()
    if stopped in done or said.result() == BYE:
        print(f"{me}: shutting down", flush=True)
        return 0
    print(f"{me}: error: rank 0 left; exiting", flush=True)
    return 1


class Head:
    """Rank 0's side: where the other ranks join, and what it does when one leaves."""

    def __init__(self, args: argparse.Namespace, stop: asyncio.Event) -> None:
        self.args = args
        self.stop = stop
        self.joined: dict[int, asyncio.StreamWriter] = {}
        self.all_in = asyncio.Event()
        self.failed = False
        self.server: asyncio.Server | None = None

    async def start(self) -> str | None:
        """Listen at --dist-init-addr; an error line when it cannot."""
        host, port = _address(self.args)
        try:
            self.server = await asyncio.start_server(self._join, host, port)
        except OSError as exc:
            return f"sim: cannot listen for the other ranks on {host}:{port}: {exc}"
        print(f"sim: waiting for {self.args.nnodes - 1} more node(s) at {host}:{port}",
              flush=True)  # fmt: skip
        return None

    async def wait_all(self) -> bool:
        """Whether every rank joined within JOIN_TIMEOUT_S (ends the server if not)."""
        try:
            await asyncio.wait_for(self.all_in.wait(), JOIN_TIMEOUT_S)
        except TimeoutError:
            missing = sorted(set(range(1, self.args.nnodes)) - set(self.joined))
            self._fail(f"ranks {missing} did not join within {JOIN_TIMEOUT_S:g} s")
            return False
        return True

    async def _join(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        try:
            rank = int(line.split()[1])
        except (IndexError, ValueError):
            writer.close()
            return
        peer = writer.get_extra_info("peername")
        self.joined[rank] = writer
        print(f"sim: node rank {rank} joined from {peer[0] if peer else '?'} "
              f"({len(self.joined) + 1} of {self.args.nnodes})", flush=True)  # fmt: skip
        if len(self.joined) == self.args.nnodes - 1:
            self.all_in.set()
        await reader.read()  # until it goes
        if not self.stop.is_set():
            self._fail(f"node rank {rank} left")

    def _fail(self, why: str) -> None:
        print(f"sim: error: {why}; the server cannot generate without it, stopping",
              flush=True)  # fmt: skip
        self.failed = True
        self.stop.set()

    async def close(self) -> None:
        for writer in self.joined.values():
            try:
                writer.write(BYE)
                await writer.drain()
            except (ConnectionError, OSError):
                pass
            writer.close()
        if self.server is not None:
            self.server.close()
