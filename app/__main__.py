"""`python -m app serve --host H --port P`: migrate the database, then serve. (contract)"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description="Rendezvous web app")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="migrate the database and serve the site")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--no-migrate", action="store_true", help="skip the database migration")
    sub.add_parser("migrate", help="apply the database migrations and exit")
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from app.migrate import upgrade

    if args.command == "migrate":
        upgrade()
        return 0
    if not args.no_migrate:
        upgrade()
    import uvicorn

    uvicorn.run("app.main:create_app", host=args.host, port=args.port, **uvicorn_options())
    return 0


def uvicorn_options() -> dict[str, Any]:
    # The app reads X-Forwarded-For itself, from RDV_TRUSTED_PROXIES only (app/limits.py):
    # uvicorn's own proxy headers would believe any local peer.
    return {"factory": True, "proxy_headers": False, "server_header": False}


if __name__ == "__main__":
    sys.exit(main())
