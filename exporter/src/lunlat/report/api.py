"""A minimal client of Prometheus' HTTP query API (urllib: the report needs no HTTP library)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode
from urllib.request import Request, urlopen


class ReportError(Exception):
    """Bad input or an unusable Prometheus: `lunlat report` prints it as one line and exits 2."""


@dataclass(frozen=True, slots=True)
class Prometheus:
    url: str
    timeout: float = 120.0

    def _post(self, path: str, params: dict[str, str]) -> Any:
        # POST: a query over many LUNs can outgrow a URL; Prometheus takes both.
        request = Request(  # noqa: S310 - the user's Prometheus URL, checked to be http(s)
            f"{self.url.rstrip('/')}{path}",
            data=urlencode(params).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        try:
            with urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                answer = json.load(response)
        except HTTPError as exc:  # 400/422/503 carry the reason as JSON
            try:
                answer = json.load(exc)
            except ValueError:
                raise ReportError(f"Prometheus at {self.url} answered HTTP {exc.code}") from None
        except (URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ReportError(f"cannot reach Prometheus at {self.url}: {reason}") from None
        except ValueError:
            raise ReportError(f"{self.url} did not answer like a Prometheus (no JSON)") from None
        if not isinstance(answer, dict) or answer.get("status") != "success":
            error = answer.get("error", answer) if isinstance(answer, dict) else answer
            raise ReportError(f"Prometheus refused a query: {error}")
        return answer["data"]

    def query(self, promql: str, at: float) -> list[dict[str, Any]]:
        data = self._post("/api/v1/query", {"query": promql, "time": f"{at:.3f}"})
        return list(data["result"]) if data["resultType"] == "vector" else []

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        return list(self._post("/api/v1/query_range", params)["result"])
