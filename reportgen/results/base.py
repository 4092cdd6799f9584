"""The base of every results model: unknown keys kept (written by a later reportgen), so
reading and saving a results file never loses anything."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- one level ---------------------------------------------------------------------------------
