"""The simulated OpenAI-compatible server (``reportgen sim``, ``python -m reportgen.sim``).

A stand-in engine for the demo and the tests, whose speed comes from its flags: ``cli`` (its
flags and faults), ``server`` (the handlers), ``app`` (the application around them: routes,
start-up and shutdown), ``http`` (its HTTP/1.1 server, on httptools), ``speed`` (a start's own
speed), ``text`` (prompts and the words it answers). Imports nothing of reportgen but its
version: it runs as a process of its own.
"""

from reportgen.sim.cli import DESCRIPTION, FAULTS, add_arguments, command, main
from reportgen.sim.text import generated_tokens, request_prompt, token_stream

__all__ = [
    "DESCRIPTION",
    "FAULTS",
    "add_arguments",
    "command",
    "generated_tokens",
    "main",
    "request_prompt",
    "token_stream",
]
