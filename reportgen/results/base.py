"""The base of every results model: unknown keys kept (written by a later reportgen), so
reading and saving a results file never loses anything."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class _AsGiven(_Model):
    """A record saved with the keys it was given and no others: a field it was not given
    (an older record's, or one left unset) stays out of results.json rather than saved as
    its default, so a run read and saved again keeps its form."""

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if isinstance(out, dict):
            for name in set(type(self).model_fields) - self.model_fields_set:
                out.pop(name, None)
        return out


# -- one level ---------------------------------------------------------------------------------
