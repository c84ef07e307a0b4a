"""`python -m app serve --host H --port P`: migrate the database, then serve. (contract)
`python -m app role EMAIL instructor|learner`: make an account an instructor (who sees where
learners struggle with the coach, /instructor/coach) or a learner again."""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description="Rendezvous web app")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="migrate the database and serve the site")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--no-migrate", action="store_true", help="skip the database migration")
    sub.add_parser("migrate", help="apply the database migrations and exit")
    role = sub.add_parser("role", help="make an account an instructor or a learner")
    role.add_argument("email", help="the account's email address")
    role.add_argument("role", choices=("instructor", "learner"))
    args = parser.parse_args(argv)
    if args.command == "role":
        return set_role(args.email, args.role)

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

    from app.config import get_settings
    from app.serving import uvicorn_options

    options = uvicorn_options(get_settings())
    uvicorn.run("app.main:create_app", host=args.host, port=args.port, **options)
    return 0


def set_role(email: str, role: str) -> int:
    from app.auth.service import set_role as set_account_role
    from app.db import unit_of_work

    try:
        with unit_of_work() as session:
            user = set_account_role(session, email=email, role=role)
            print(f"{user.email} is now {'an' if role == 'instructor' else 'a'} {role}")
    except LookupError as exc:
        print(f"python -m app role: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
