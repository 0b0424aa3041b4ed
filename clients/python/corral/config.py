"""Where the client finds its servers and token: the CLI's rules (src/cli/api_client.cc).

The config file `corral login` writes ($XDG_CONFIG_HOME/corral/config, else
~/.config/corral/config: JSON {"server": "URL[,URL...]", "token": ..., "ca_cert": ...}), then
CORRAL_SERVER, CORRAL_TOKEN and CORRAL_CA_CERT over it, then the arguments given to Client over
those. Inside a job without a token of its user's, the job token (CORRAL_JOB_TOKEN).
CORRAL_RETRY_TIMEOUT (seconds, 0 to 3600; default 10) bounds how long one request looks for a
server that answers."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Optional

from .errors import ConfigError
from .servers import parse_server_list

DEFAULT_RETRY_TIMEOUT_S = 10.0
MAX_CONFIG_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class ClientConfig:
    servers: list[str]  # normalized base URLs, in order
    token: str  # never printed
    ca_cert: str  # a PEM bundle to verify https servers with; "" for the system's
    retry_timeout_s: float  # how long one request may go on trying the servers
    servers_from: str  # "CORRAL_SERVER", "Client(url=...)" or the config file's path


def config_path() -> str:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return os.path.join(xdg, "corral", "config")
    return os.path.join(os.environ.get("HOME") or ".", ".config", "corral", "config")


def _retry_timeout() -> float:
    text = os.environ.get("CORRAL_RETRY_TIMEOUT", "")
    if not text:
        return DEFAULT_RETRY_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise ConfigError(f"CORRAL_RETRY_TIMEOUT: expected seconds in 0..3600, got '{text}'")
    return seconds


def _read_file(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(MAX_CONFIG_FILE_BYTES).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return {}  # as the CLI: a missing or unreadable file is no configuration
    return data if isinstance(data, dict) else {}


def load_config(url: Optional[str] = None, token: Optional[str] = None) -> ClientConfig:
    """The configuration as above; ConfigError when no server is configured or the list is
    malformed (naming where it came from)."""
    path = config_path()
    saved = _read_file(path)
    servers, servers_from = str(saved.get("server") or ""), path
    the_token = str(saved.get("token") or "")
    ca_cert = str(saved.get("ca_cert") or "")
    if os.environ.get("CORRAL_SERVER"):
        servers, servers_from = os.environ["CORRAL_SERVER"], "CORRAL_SERVER"
    # Inside a job with no token of its user's: the job's own (it may read and report on
    # its job only).
    the_token = os.environ.get("CORRAL_TOKEN") or the_token or os.environ.get(
        "CORRAL_JOB_TOKEN", "")
    ca_cert = os.environ.get("CORRAL_CA_CERT") or ca_cert
    if url:
        servers, servers_from = url, "Client(url=...)"
    if token:
        the_token = token
    if not servers:
        raise ConfigError("no server configured: pass Client(url=..., token=...), run 'corral "
                          "login --server URL[,URL...] --token T', or set CORRAL_SERVER and "
                          "CORRAL_TOKEN")
    return ClientConfig(parse_server_list(servers, servers_from), the_token, ca_cert,
                        _retry_timeout(), servers_from)
