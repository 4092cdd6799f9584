"""The simulated OpenAI-compatible server (``reportgen sim``, ``python -m reportgen.sim``).

A stand-in engine for the demo and the tests, whose speed comes from its flags. Imports
nothing of reportgen but its version: it runs as a server process of its own.
"""

from reportgen.sim.server import (
    DESCRIPTION,
    FAULTS,
    add_arguments,
    command,
    generated_tokens,
    main,
    request_prompt,
    token_stream,
)

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
