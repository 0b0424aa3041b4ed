"""The servers a client may talk to and the rule that finds the one serving, as the CLI has it
(src/common/server_list.h): a comma-separated list of base URLs, tried in turn until one
answers. A server that is not the leader answers 503, naming the leader in `Corral-Leader` when
it knows it; the client tries that URL next, else the next one of the list; coming back to a
server already tried begins a new round after a wait of 100 ms doubling up to 1 s.

Pure logic: no sockets and no clock (transport.py sends and sleeps)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Optional

from .errors import ConfigError, ServerUnreachable

MAX_SERVERS = 16  # URLs in one list
MAX_SERVER_URL_BYTES = 512  # one URL

_HOST_NAME = re.compile(r"[A-Za-z0-9._-]+")
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]+\]")


def _parse_url(text: str) -> tuple[str, str, Optional[int]]:
    """(scheme, host lower-cased, port or None), or ValueError saying the rule `text` breaks."""
    if not text:
        raise ValueError("is empty")
    if len(text.encode()) > MAX_SERVER_URL_BYTES:
        raise ValueError(f"is longer than {MAX_SERVER_URL_BYTES} bytes")
    lowered = text.lower()
    scheme = next((s for s in ("https", "http") if lowered.startswith(s + "://")), None)
    if scheme is None:
        raise ValueError("must start with http:// or https://")
    rest = text[len(scheme) + 3:]
    if rest.endswith("/"):
        rest = rest[:-1]
    if any(c in rest for c in "/?#@"):
        raise ValueError("must be scheme://host[:port] (no user, path, query or fragment)")
    if rest.startswith("["):
        end = rest.find("]") + 1
        if end == 0 or not _IPV6.fullmatch(rest[:end]) or end == 2:
            raise ValueError("has a malformed [IPv6] host")
    else:
        end = rest.find(":") if ":" in rest else len(rest)
        if end == 0 or not _HOST_NAME.fullmatch(rest[:end]):
            raise ValueError("has no host name or a character no host name has")
    host, port_text = rest[:end].lower(), rest[end:]
    port = None
    if port_text:
        digits = port_text[1:]
        if not port_text.startswith(":") or not digits.isdigit() or not 1 <= int(digits) <= 65535:
            raise ValueError("has a port that is not a number in 1..65535")
        port = int(digits)
    return scheme, host, port


def _normalized(parsed: tuple[str, str, Optional[int]]) -> str:
    scheme, host, port = parsed
    return f"{scheme}://{host}" + (f":{port}" if port else "")


def _key(parsed: tuple[str, str, Optional[int]]) -> str:
    """What two URLs alike share: the port made explicit."""
    scheme, host, port = parsed
    return f"{scheme}://{host}:{port or (443 if scheme == 'https' else 80)}"


def normalize_url(url: str) -> str:
    """One URL checked as an entry of a list, normalized; ValueError naming the rule broken."""
    try:
        return _normalized(_parse_url(url.strip()))
    except ValueError as e:
        raise ValueError(f"URL '{url}' {e}") from None


def parse_server_list(text: str, source: str) -> list[str]:
    """"http://a:8080,https://b" as the CLI reads it: 1 to MAX_SERVERS entries, no two alike;
    ConfigError naming `source` (where the text came from), the entry and the rule it breaks."""
    entries = text.split(",")
    if len(entries) > MAX_SERVERS:
        raise ConfigError(f"{source}: server list: {len(entries)} URLs, more than the limit of "
                          f"{MAX_SERVERS}")
    urls, keys = [], []
    for i, entry in enumerate(e.strip() for e in entries):
        where = f"{source}: server list: URL {i + 1} '{entry}'"
        try:
            parsed = _parse_url(entry)
        except ValueError as e:
            raise ConfigError(f"{where} {e}") from None
        if _key(parsed) in keys:
            raise ConfigError(f"{where} is URL {keys.index(_key(parsed)) + 1} again")
        keys.append(_key(parsed))
        urls.append(_normalized(parsed))
    return urls


def _find(urls: list[str], url: str) -> Optional[int]:
    try:
        key = _key(_parse_url(url.strip()))
    except ValueError:
        return None
    return next((i for i, u in enumerate(urls) if _key(_parse_url(u)) == key), None)


def retry_wait(round_: int) -> float:
    """Seconds before the n-th new round over the servers (n from 1): 0.1 doubling up to 1."""
    return min(0.1 * 2 ** (round_ - 1), 1.0)


class Outcome(enum.Enum):
    ANSWERED = "answered"  # an HTTP answer other than a follower's 503: the request is done
    NOT_LEADER = "not_leader"  # 503 without Corral-Busy: the server does not serve
    NOT_CONNECTED = "not_connected"  # no connection: the request was not sent
    LOST_AFTER_SEND = "lost_after_send"  # failed once sent: the server may have carried it out


@dataclass
class Attempt:
    outcome: Outcome
    detail: str = ""  # for errors: "could not connect", "503: no leader yet"
    leader: str = ""  # a 503's Corral-Leader


class LeaderSearch:
    """One request's walk over the servers, from `start` (the URL that answered last, else the
    first). After each attempt, next() returns the seconds to wait before sending to `url`
    again, None when the request is done, or raises ServerUnreachable."""

    def __init__(self, urls: list[str], start: str, idempotent: bool, deadline_s: float):
        self._urls = urls
        self._idempotent = idempotent
        self._deadline_s = deadline_s
        listed = _find(urls, start) if start else None
        if listed is not None:
            self._cursor, self._listed, self.url = listed, True, urls[listed]
        elif start:
            # A leader named outside the list: after it, the list from its first entry.
            self._cursor, self._listed, self.url = len(urls) - 1, False, normalize_url(start)
        else:
            self._cursor, self._listed, self.url = 0, True, urls[0]
        self._rounds = 0
        self._in_round = [self.url]
        self._tried: dict[str, list] = {}  # url -> [last detail, count], in order first tried

    def _leader_to_follow(self, attempt: Attempt) -> Optional[str]:
        # Only a listed server is taken at its word; an https one never sends us to plain http.
        if attempt.outcome != Outcome.NOT_LEADER or not attempt.leader or not self._listed:
            return None
        try:
            leader = normalize_url(attempt.leader)
        except ValueError:
            return None
        if _find(self._urls, leader) == self._cursor:
            return None
        if self.url.startswith("https://") and not leader.startswith("https://"):
            return None
        return leader

    def next(self, attempt: Attempt, elapsed_s: float) -> Optional[float]:
        tries = self._tried.setdefault(self.url, ["", 0])
        tries[0], tries[1] = attempt.detail, tries[1] + 1
        if attempt.outcome == Outcome.ANSWERED:
            return None
        if attempt.outcome == Outcome.LOST_AFTER_SEND and not self._idempotent:
            raise ServerUnreachable(
                f"no answer from {self.url} once the request was sent ({attempt.detail}): not sent "
                "again, since the server may have carried it out; check before trying again" +
                (f" (tried {self.tried()})" if len(self._tried) > 1 else ""))
        leader = self._leader_to_follow(attempt)
        leader_listed = _find(self._urls, leader) if leader else None
        if leader:
            next_cursor = self._cursor if leader_listed is None else leader_listed
            next_url = leader
        else:
            next_cursor = (self._cursor + 1) % len(self._urls)
            next_url = self._urls[next_cursor]
        wait = 0.0
        if next_url in self._in_round:
            self._rounds += 1
            wait = retry_wait(self._rounds)
            self._in_round = []
        if elapsed_s + wait > self._deadline_s:
            one = len(self._urls) == 1 and len(self._tried) == 1
            raise ServerUnreachable(
                ("cannot reach the server" if one else "cannot reach a leader") +
                f" within {self._deadline_s:g} s: tried {self.tried()}")
        self._cursor = next_cursor
        self._listed = not leader or leader_listed is not None
        self.url = next_url
        self._in_round.append(next_url)
        return wait

    def tried(self) -> str:
        """"http://a:1 (could not connect, 3 times), http://b:2 (503: ...)"."""
        return ", ".join(f"{url} ({detail}" + (f", {count} times" if count > 1 else "") + ")"
                         for url, (detail, count) in self._tried.items())
