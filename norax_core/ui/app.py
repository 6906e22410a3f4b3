"""The inspector's Starlette app: the page, and the JSON API under ``/api/`` that it calls.

Every read and write goes through :class:`~norax_core.NoraxMemory`'s public methods (``get``,
``search``, ``delete``, ``upsert``) or the store's internal API (``browse``,
``neighbourhood``); writes answer 403 unless the app was created with ``allow_writes``.

=======================  ==============================================================
``GET /api/info``        store, namespaces with their counts, whether writes are allowed
``GET /api/memories``    a page of a namespace's memories, newest first, filtered
``GET /api/memories/X``  one memory
``PUT /api/memories/X``  edit it (an ``upsert``: all or nothing)
``DELETE .../X``         delete it
``GET /api/search``      ranked results, each with its signals, stages and ``why``
``GET /api/graph/X``     the memory's entity-graph neighbourhood, laid out
=======================  ==============================================================
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from norax_core import validation as check
from norax_core.cli_common import parse_meta
from norax_core.engine import NoraxMemory
from norax_core.errors import InvalidInputError, MemoryNotFoundError, NoraxError
from norax_core.models import SIGNALS
from norax_core.query import plan_query
from norax_core.ui.views import explain_results, graph_picture, memory_json

logger = logging.getLogger("norax")

STATIC = Path(__file__).parent / "static"
PAGE_MAX = 200
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The page loads nothing but its own files; memory text is never markup.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class _Forbidden(NoraxError):
    """A write to a read-only inspector, or from another site's page."""


Handler = Callable[[Request], Awaitable[Any]]


def _api(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Turn a handler's value into JSON and the engine's errors into 400, 403 and 404."""

    async def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(await handler(request), headers=HEADERS)
        except _Forbidden as exc:
            status, message = 403, str(exc)
        except MemoryNotFoundError as exc:
            status, message = 404, str(exc)
        except NoraxError as exc:
            status, message = 400, str(exc)
        return JSONResponse({"error": message}, status_code=status, headers=HEADERS)

    return endpoint


def _int(raw: str | None, name: str, default: int, low: int, high: int) -> int:
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInputError(f"{name} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise InvalidInputError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _where(request: Request) -> dict[str, Any] | None:
    """The ``where`` parameter (a JSON Chroma filter) and-ed with every ``meta=key=value``."""
    terms: list[dict[str, Any]] = []
    raw = request.query_params.get("where", "").strip()
    if raw:
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"where is not JSON: {exc}") from None
        terms += [check.where(parsed) or {}]
    items = [m for m in request.query_params.getlist("meta") if m.strip()]
    terms += [{k: v} for k, v in (check.where(parse_meta(items)) or {}).items()]
    terms = [t for t in terms if t]
    return None if not terms else terms[0] if len(terms) == 1 else {"$and": terms}


def _time(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name, "").strip()
    return check.timestamp(raw, name) if raw else None


def create_app(
    memory: NoraxMemory, *, allow_writes: bool = False, host: str = "127.0.0.1"
) -> Starlette:
    """The inspector over an open ``memory``.

    Args:
        memory: The store to show (the caller opens and closes it).
        allow_writes: Let the page delete and edit memories; otherwise those endpoints
            answer 403.
        host: The address it is served on: on a loopback address, requests naming another
            host are refused (DNS rebinding); writes from pages of other origins always are.
    """
    mem = memory

    def namespace(request: Request) -> str:
        return check.namespace(request.query_params.get("namespace") or None)

    def one(request: Request) -> Any:
        found = mem.get(request.path_params["id"], namespace=namespace(request))
        if not found:
            raise MemoryNotFoundError(f"no memory {request.path_params['id']!r} in this namespace")
        return found[0]

    def writable(request: Request) -> None:
        if not allow_writes:
            raise _Forbidden("read-only: start `norax ui --allow-writes` to delete or edit")
        origin = request.headers.get("origin")
        if origin and urlsplit(origin).netloc != request.headers.get("host"):
            raise _Forbidden(f"writes from another origin ({origin}) are refused")

    def counts() -> list[dict[str, Any]]:
        return [{"name": n, "count": mem.count(n)} for n in mem.namespaces()]

    async def info(request: Request) -> Any:
        return {
            "store": str(mem.path) if mem.path else None,
            "allow_writes": allow_writes,
            "weights": mem.weights.name,
            "signals": list(SIGNALS),
            "namespaces": await run_in_threadpool(counts),
        }

    async def memories(request: Request) -> Any:
        q = request.query_params
        total, page = await run_in_threadpool(
            mem.store.browse,
            namespace(request),
            kind=q.get("kind") or None,
            inferred_kind=q.get("inferred_kind") or None,
            since=_time(request, "since"),
            until=_time(request, "until"),
            where=_where(request),
            limit=_int(q.get("limit"), "limit", 25, 1, PAGE_MAX),
            offset=_int(q.get("offset"), "offset", 0, 0, 10**9),
        )
        return {"total": total, "memories": [memory_json(m) for m in page]}

    async def memory_detail(request: Request) -> Any:
        return memory_json(await run_in_threadpool(one, request))

    async def delete(request: Request) -> Any:
        writable(request)
        ns, mid = namespace(request), request.path_params["id"]
        if not await run_in_threadpool(mem.delete, [mid], ns):
            raise MemoryNotFoundError(f"no memory {mid!r} in namespace {ns!r}")
        logger.info("norax ui: deleted %r from namespace %r", mid, ns)
        return {"deleted": mid}

    async def edit(request: Request) -> Any:
        writable(request)
        try:
            body = await request.json()
        except ValueError:
            raise InvalidInputError("the body must be a JSON object") from None
        if not isinstance(body, dict) or set(body) - {"text", "kind", "created_at", "metadata"}:
            raise InvalidInputError("the body takes text, kind, created_at and metadata only")
        old = await run_in_threadpool(one, request)

        def write() -> Any:
            mem.upsert(
                body.get("text", old.text),
                ids=old.id,
                kind=body.get("kind", old.kind),
                created_at=body.get("created_at", old.created_at),
                namespace=old.namespace,
                metadata=body.get("metadata", old.metadata),
            )
            return mem.get(old.id, namespace=old.namespace)[0]

        logger.info("norax ui: edited %r in namespace %r", old.id, old.namespace)
        return memory_json(await run_in_threadpool(write))

    async def search(request: Request) -> Any:
        q = request.query_params
        text, ns = q.get("q", ""), namespace(request)
        now_ts = check.timestamp(q["now"], "now") if q.get("now", "").strip() else time.time()
        k = _int(q.get("k"), "k", 10, 1, PAGE_MAX)
        where = _where(request)
        results = await run_in_threadpool(mem.search, text, k, ns, where, now_ts)
        plan = results[0].query_plan if results and results[0].query_plan else None
        if plan is None:
            plan = plan_query(check.query(text), now_ts).info()
        return {
            "now": now_ts,
            "plan": plan.to_dict(),
            "weights": mem.weights.name,
            "results": explain_results(results, mem.weights),
        }

    async def graph(request: Request) -> Any:
        m = await run_in_threadpool(one, request)
        limit = _int(request.query_params.get("limit"), "limit", 8, 1, 50)
        nbhd, shared = await run_in_threadpool(mem.store.neighbourhood, m.namespace, m.id, limit)
        return graph_picture(m, nbhd, shared)

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=HEADERS)

    routes = [
        Route("/", page),
        Route("/api/info", _api(info)),
        Route("/api/namespaces", _api(info)),
        Route("/api/memories", _api(memories)),
        Route("/api/memories/{id:path}", _api(memory_detail), methods=["GET"]),
        Route("/api/memories/{id:path}", _api(delete), methods=["DELETE"]),
        Route("/api/memories/{id:path}", _api(edit), methods=["PUT"]),
        Route("/api/search", _api(search)),
        Route("/api/graph/{id:path}", _api(graph)),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK if host in LOOPBACK else ["*"])
        ],
    )
