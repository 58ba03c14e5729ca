"""Which client a system variant's spec names (HTTP, MCP over stdio or streamable HTTP, a server per
namespace, a library in-process), and what served a job (recorded beside the figures)."""

from __future__ import annotations

from ...core.errors import ConfigError

# Parquet key-value metadata of a system variant's outcomes tables: a digest of the definition that
# made them (:func:`definition`), by which memobench score tells this service's results from another's

MAX_RESPONSE_MB = 64  # the largest answer read from an HTTP service (system.max_response_mb)


def _command(command) -> list[str]:
    import shlex

    return shlex.split(command) if isinstance(command, str) else list(command)


def client_of(spec: dict, where: str = "memory service", log=print, workroot=None):
    """The client of a system variant's service (HTTP, or MCP over stdio or streamable HTTP; a server per
    namespace, its working folders under ``workroot`` or a temporary folder: services/transport/servers.py; or a library
    in-process, ``log`` getting what its factory prints); ``where`` names the variant in a config line (an
    unset ``$NAME``), raised before any request."""
    from ..operations.api import from_environment, header_value, url_from_environment

    settings = {"timeout_s": float(spec["timeout_s"]), "retries": int(spec["retries"]),
                "backoff_s": float(spec["backoff_s"])}
    if spec["transport"] == "library":
        from ..definition.inprocess import client

        return client(spec, where, log)
    if spec.get("headers"):
        # read when the job starts, never written: the spec (the rule's params) holds the $NAMEs
        settings["headers"] = {k: header_value(v, f"{where}: system: headers: {k}") for k, v in spec["headers"].items()}
    if spec["transport"] == "http":
        from .client import HttpClient

        # read as given, not a DEFAULTS entry: a new default key would change every system variant's params
        limit = int(float(spec.get("max_response_mb", MAX_RESPONSE_MB)) * 2**20)
        return HttpClient(url_from_environment(spec["url"], f"{where}: system: url"), spec["operations"],
                          max_response_bytes=limit, plain=spec["answer"] == "plain", **settings)
    from .mcp import McpClient, sdk_missing

    if sdk_missing():
        raise ConfigError(f"memory service {spec['identity']!r}: an MCP service needs the MCP Python SDK, which is "
                          f"not installed: pip install 'memobench[mcp]' (or -e '.[mcp]' in a checkout)")
    m, settings["answer"] = spec["mcp"], spec["answer"]
    if spec["transport"] == "mcp-http":
        url = url_from_environment(m["url"], f"{where}: system: mcp: url")
        return McpClient(spec["operations"], url=url, **settings)
    env = m.get("env")
    if env is not None:
        env = {k: from_environment(v, f"{where}: system: mcp: env: {k}") for k, v in env.items()}
    if spec.get("per_namespace"):
        from .servers import NamespaceServers

        made = []  # the first server made: what it says it is names the service (served_by)

        def make(command, env):
            client = McpClient(spec["operations"], command=command, env=env, **settings)
            made[:] = made or [client]
            return client

        servers = NamespaceServers(make, _command(m["command"]), env, workroot)
        servers.identified = made
        return servers
    return McpClient(spec["operations"], command=_command(m["command"]), env=env, **settings)


def served_by(spec: dict, client) -> dict:
    """What served a job (services/identity.py): an MCP server's ``server`` (its serverInfo's name and
    version, once connected), a stdio server's ``package``, the ``host`` of a URL (never its user
    information); whatever the server said starred where it holds a secret."""
    from ...core.secrets import mask
    from ..identity import host_of, package_of

    out = {}
    info = next((c.server_info for c in getattr(client, "identified", [client]) if getattr(c, "server_info", None)),
                None)
    if info:
        out["server"] = {k: mask(v) for k, v in info.items()}
    if spec["transport"] == "mcp-stdio":
        out["package"] = package_of(_command(spec["mcp"]["command"]))
    url = spec.get("url") or (spec.get("mcp") or {}).get("url")
    if isinstance(url, str):
        out["host"] = host_of(url)
    return out
