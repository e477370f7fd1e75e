"""One row of the doctor's report, shared by its CPU and GPU checks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail", "info"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    advice: str = ""


def major(version: str | int | None) -> int | None:
    """The major of a version ("12.4" -> 12); None stays None."""
    return None if version is None else int(str(version).split(".")[0])
