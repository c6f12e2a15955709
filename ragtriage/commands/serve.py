"""`ragtriage serve`: the REST API, its OpenAPI docs and the HTML reports, served by uvicorn."""

from __future__ import annotations

import socket

import click

from ragtriage.commands.common import WorkspaceAt, workspace_options
from ragtriage.errors import InputError


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free port), or an InputError saying what to do."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise InputError(f"--host {host}: cannot resolve it ({error.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise InputError(
            f"cannot listen on {host}:{port}: {error.strerror}; pick another port with --port (0 picks a free one)"
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port (0: any free one).",
)
@workspace_options
def serve_command(host: str, port: int, where: WorkspaceAt) -> None:
    """Serve the REST API (/api/v1, docs at /docs) and run reports (/) until Ctrl-C.

    Only this machine may connect unless RAGTRIAGE_API_TOKEN is set; with a token, binding to
    another interface is allowed and every request needs `Authorization: Bearer <token>`.
    """
    # The web stack (FastAPI, uvicorn): only when the server starts, not on every command's --help.
    import uvicorn

    from ragtriage.service.app import create_app
    from ragtriage.service.auth import check_bind, token_from_env

    token = token_from_env()
    check_bind(host, token)
    app = create_app(where.home, where.config_file, token=token)
    sock = _bind(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    auth = "bearer token required" if token else "no token: this machine only"
    click.echo(f"ragtriage API on http://{shown}:{bound_port} (docs /docs; {auth})", err=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn re-raises Ctrl-C after its graceful shutdown; stopping is the normal end
    finally:
        sock.close()
    click.echo("ragtriage API stopped", err=True)
