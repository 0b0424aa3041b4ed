"""Sends one API request to the servers of a ClientConfig as the CLI does
(src/cli/api_client.cc): each request walks the list (servers.LeaderSearch) until a server
answers; a saturated server's 503 (Corral-Busy) and a 429 whose Retry-After is at most
MAX_LIMIT_WAIT_S are waited out and sent again to the same server, within BUSY_BUDGET_S per
request. Standard library only (http.client)."""

from __future__ import annotations

import http.client
import json
import random
import ssl
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Optional

from .config import ClientConfig
from .errors import ApiError, ServerUnreachable
from .servers import Attempt, LeaderSearch, Outcome

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0
BUSY_BUDGET_S = 30.0  # the waits on busy answers one request may spend in all
MAX_LIMIT_WAIT_S = 5  # a 429 asking a longer wait is raised at once
BUSY_JITTER_SPREAD = 0.2  # a busy wait is its Retry-After plus up to this fraction of it
MAX_ANSWER_BYTES = 64 << 20  # a server's answer; logs pages are at most 1 MiB
USER_AGENT = "corral-client-python/0.1"


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # names lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


@dataclass
class _Sent:
    response: Optional[Response] = None
    attempt: Attempt = field(default_factory=lambda: Attempt(Outcome.ANSWERED))


def _retry_after(value: str) -> Optional[int]:
    return int(value) if value.isdigit() else None


def _problem(response: Response) -> dict[str, Any]:
    try:
        problem = response.json()
    except ValueError:
        problem = None
    if isinstance(problem, dict):
        return problem
    return {"detail": response.body.decode("utf-8", "replace")[:2000]}


def _busy_wait(response: Response, waited: float) -> Optional[float]:
    """Seconds to wait before sending the same request again, or None to take the answer;
    `waited`: what the request already waited on busy answers (within BUSY_BUDGET_S)."""
    after = _retry_after(response.headers.get("retry-after", ""))
    busy = response.status == 503 and response.headers.get("corral-busy")
    if busy:
        after = after or 1
    elif response.status != 429 or after is None or after <= 0 or after > MAX_LIMIT_WAIT_S:
        return None
    wait = after * (1 + BUSY_JITTER_SPREAD * random.random())
    if waited + wait > BUSY_BUDGET_S:
        if busy:
            raise ServerUnreachable(
                f"{_problem(response).get('detail', 'server busy')} (still busy after "
                f"waiting {waited:.0f} s)")
        return None
    return wait


class Transport:
    """Thread-safe: each request opens its own connection."""

    def __init__(self, config: ClientConfig):
        self.config = config
        self._answered = ""  # the URL that answered last: the next request starts there
        self._ssl = ssl.create_default_context(cafile=config.ca_cert or None)

    def request(self, method: str, path: str, body: Any = None,
                query: Optional[dict[str, Any]] = None) -> Response:
        """Sends and returns a 2xx answer; ApiError for an error answer, ServerUnreachable when
        no server answered. POST is sent again only when it certainly was not carried out."""
        if query:
            pairs = {k: v for k, v in query.items() if v is not None}
            if pairs:
                path += "?" + urllib.parse.urlencode(pairs)
        payload = None if body is None else json.dumps(body).encode()
        idempotent = method != "POST"
        waited = 0.0  # on busy answers, by this request
        while True:
            response = self._search(method, path, payload, idempotent)
            wait = _busy_wait(response, waited)
            if wait is None:
                break
            time.sleep(wait)
            waited += wait
        if response.status >= 300:
            raise ApiError(response.status, _problem(response))
        return response

    def _search(self, method: str, path: str, payload: Optional[bytes],
                idempotent: bool) -> Response:
        start = time.monotonic()
        search = LeaderSearch(self.config.servers, self._answered, idempotent,
                              self.config.retry_timeout_s)
        listened = False  # something accepted a connection: not only a wrong address
        while True:
            sent = self._send_once(search.url, method, path, payload)
            listened = listened or sent.attempt.outcome != Outcome.NOT_CONNECTED
            try:
                wait = search.next(sent.attempt, time.monotonic() - start)
            except ServerUnreachable as e:
                if not listened:
                    raise ServerUnreachable(
                        f"{e}. Is the server running there? (address from "
                        f"{self.config.servers_from})") from None
                raise
            if wait is None:
                self._answered = search.url
                assert sent.response is not None
                return sent.response
            time.sleep(wait)

    def _send_once(self, url: str, method: str, path: str, payload: Optional[bytes]) -> _Sent:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                parsed.hostname, parsed.port, timeout=CONNECT_TIMEOUT_S, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(parsed.hostname, parsed.port,
                                              timeout=CONNECT_TIMEOUT_S)
        try:
            try:
                conn.connect()
            except (OSError, ssl.SSLError) as e:
                return _Sent(None, Attempt(Outcome.NOT_CONNECTED, f"could not connect: {e}"))
            conn.sock.settimeout(READ_TIMEOUT_S)
            headers = {"Authorization": "Bearer " + self.config.token, "User-Agent": USER_AGENT,
                       "Accept": "application/json"}
            if payload is not None:
                headers["Content-Type"] = "application/json"
            try:
                conn.request(method, path, body=payload, headers=headers)
                r = conn.getresponse()
                body = r.read(MAX_ANSWER_BYTES)
            except (OSError, http.client.HTTPException) as e:
                return _Sent(None, Attempt(Outcome.LOST_AFTER_SEND, f"no answer: {e}"))
            response = Response(r.status, {k.lower(): v for k, v in r.getheaders()}, body)
        finally:
            conn.close()
        if response.status == 503 and not response.headers.get("corral-busy"):
            detail = str(_problem(response).get("detail", ""))[:200]
            return _Sent(response, Attempt(Outcome.NOT_LEADER, "503: " + detail,
                                           response.headers.get("corral-leader", "")))
        return _Sent(response, Attempt(Outcome.ANSWERED, f"HTTP {response.status}"))
