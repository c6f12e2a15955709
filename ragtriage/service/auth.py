"""Who may call the service: anyone on this machine, or, with a token set, bearers of that token.

`ragtriage serve` refuses to bind beyond the loopback interface unless `RAGTRIAGE_API_TOKEN` is set;
with a token every API request and report page needs `Authorization: Bearer <token>` (the OpenAPI
docs stay open: they hold no data).
"""

from __future__ import annotations

import hmac
import ipaddress
import os

from fastapi import HTTPException, Request

from ragtriage.errors import InputError

TOKEN_ENV = "RAGTRIAGE_API_TOKEN"


def token_from_env() -> str | None:
    """The API token from the environment, or None when unset or blank."""
    value = os.environ.get(TOKEN_ENV, "").strip()
    return value or None


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1); False for 0.0.0.0 and the rest."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback `host` without a token.

    Raises:
        InputError: binding beyond this machine with no token set.
    """
    if token is None and not is_loopback(host):
        raise InputError(
            f"--host {host} makes the API reachable from other machines; set {TOKEN_ENV} to a secret "
            "(clients then send `Authorization: Bearer <token>`) or bind to 127.0.0.1"
        )


class BearerToken:
    """FastAPI dependency: checks `Authorization: Bearer <token>` when a token is configured."""

    def __init__(self, token: str | None) -> None:
        self.token = token

    def __call__(self, request: Request) -> None:
        if self.token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            raise HTTPException(
                status_code=401,
                detail=f"send `Authorization: Bearer <token>` with the token in {TOKEN_ENV} on the server",
                headers={"WWW-Authenticate": "Bearer"},
            )
