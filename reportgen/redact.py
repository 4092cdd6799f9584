"""Keep secrets out of everything reportgen writes or prints.

A value is secret when its name looks like a credential (``HF_TOKEN``, ``--api-key``,
``OPENAI_API_KEY``, ``password``...) or when the value itself looks like a well-known token
format (``hf_...``, ``sk-...``, bearer tokens). Redaction keeps the name, so a reader still sees
*that* a token was set, never *what* it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "***"

# "token" only as a name's last word (HF_TOKEN, --hf-token, x-api-token): engines' flags
# count tokens (max-num-batched-tokens, speculative-num-draft-tokens, long-prefill-token-
# threshold) and those values must stay visible. "auth" and "authorization" as whole words.
_SECRET_NAME = re.compile(
    r"((^|[-_.])(?<!per[-_.])(?<!first[-_.])token$|secret|passw(or)?d|api[-_]?key|access[-_]?key|credential|"
    r"(^|[-_.])auth(orization)?([-_.]|$)|private[-_]?key)",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"xox[baprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b"
)
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")


def is_secret_name(name: str) -> bool:
    """True when a variable, flag or header name suggests its value is a credential."""
    return bool(_SECRET_NAME.search(name))


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """Replace token-shaped substrings in free text (a log line, a command line), and every
    occurrence of the ``known`` secret values (``known_secrets``) that stands as a word of
    its own: a key of "token" must not turn "input_tokens" into "input_***s"."""
    for value in known:
        if value in text:
            text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(value)}(?![A-Za-z0-9_])", REDACTED, text)
    text = _SECRET_VALUE.sub(REDACTED, text)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def known_secrets(*tables: Mapping[str, object]) -> list[str]:
    """The values of secret-named entries (``api-key``, ``HF_TOKEN``...) of flag and
    environment tables: whatever their shape, they are hidden wherever they turn up (a
    server that prints its own arguments, an error message quoting a header). Longest first,
    so a secret that contains another is hidden whole."""
    found = {
        str(v)
        for table in tables
        for k, v in table.items()
        if is_secret_name(k) and isinstance(v, (str, int)) and len(str(v)) >= 4
    }
    return sorted(found, key=len, reverse=True)


def redact_tree(value: object) -> object:
    """A copy of JSON-like data (a server's /server_info answer) with the values of
    secret-named keys hidden at any depth, and token-shaped strings in it too."""
    if isinstance(value, Mapping):  # (a flag that is a number or a switch is no secret)
        return {
            k: REDACTED if is_secret_name(str(k)) and isinstance(v, str) and v else redact_tree(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_tree(v) for v in value]
    return redact_text(value) if isinstance(value, str) else value


def redact_flag(name: str, value: object) -> object:
    """A flag's or variable's value as it may be shown: hidden when the name is secret-looking
    (an absent value stays absent, so a reader still sees that it was added or removed)."""
    return REDACTED if value is not None and is_secret_name(name) else value


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of an environment mapping with secret values replaced."""
    return {k: (REDACTED if is_secret_name(k) else redact_text(str(v))) for k, v in env.items()}


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A copy of a command line with the values of secret-looking flags replaced.

    Handles ``--api-key VALUE`` and ``--api-key=VALUE``.
    """
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("-") and "=" in arg:
            flag, _, _value = arg.partition("=")
            if is_secret_name(flag):
                out.append(f"{flag}={REDACTED}")
                continue
        elif arg.startswith("-") and is_secret_name(arg):
            hide_next = True
        out.append(redact_text(arg))
    return out
