"""``norax ui``: a memory inspector in the browser, served on 127.0.0.1.

- :mod:`~norax_core.ui.views`: what the page shows, as pure functions (a memory as JSON, why
  a result ranks where it does, the entity-graph picture's layout).
- :mod:`~norax_core.ui.app`: the Starlette app, its JSON API under ``/api/`` and the page
  (``static/``: one HTML page, one JS and one CSS file, shipped in the package).

The web framework is the optional extra ``ui`` (``pip install "norax[ui]"``), imported only
when the command runs.
"""

from __future__ import annotations

import argparse
import socket
from typing import Any

from norax_core.cli_common import open_memory, store_path
from norax_core.errors import NoraxError

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add ``ui`` to the ``norax`` sub-command parsers."""
    u = sub.add_parser("ui", help="inspect a store in the browser (a local page)")
    # SUPPRESS: without the flag, ``norax --store PATH ui`` keeps the global one.
    u.add_argument("--store", default=argparse.SUPPRESS, help="store folder (default ./.norax)")
    u.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    u.add_argument("--port", type=int, default=8787, help="port (default 8787; 0: any free)")
    u.add_argument(
        "--allow-writes",
        action="store_true",
        help="allow deleting and editing memories from the page (default: read-only)",
    )
    u.set_defaults(func=_cmd_ui)


def _cmd_ui(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from norax_core.ui.app import create_app
    except ImportError as exc:
        raise NoraxError(f'norax ui needs the "ui" extra: pip install "norax[ui]" ({exc})') from exc
    path = store_path(args)
    if not path.exists():
        raise NoraxError(f"no store at {path} (run `norax demo` to build one, or pass --store)")
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
        sock.listen(128)  # connections wait in the backlog from the moment the URL is printed
    except OSError as exc:
        raise NoraxError(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
    port = sock.getsockname()[1]
    with open_memory(args) as mem:
        app = create_app(mem, allow_writes=args.allow_writes, host=args.host)
        mode = "writes allowed" if args.allow_writes else "read-only"
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"norax ui: {path} ({mode}) at http://{host}:{port}/", flush=True)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        server.run(sockets=[sock])
    return 0
