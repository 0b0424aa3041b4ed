"""The server list and the leader search (corral/servers.py): pure logic, no sockets."""

import unittest

from corral.errors import ConfigError, ServerUnreachable
from corral.servers import (Attempt, LeaderSearch, Outcome, normalize_url, parse_server_list,
                            retry_wait)

REFUSED = Attempt(Outcome.NOT_CONNECTED, "could not connect")


class ServerListTest(unittest.TestCase):
    def test_parses_and_normalizes(self):
        self.assertEqual(parse_server_list(" HTTP://A.example:8080/ , https://[::1]", "x"),
                         ["http://a.example:8080", "https://[::1]"])

    def test_refuses_naming_the_entry_and_the_rule(self):
        for text, said in (("ftp://a", "URL 1 'ftp://a' must start with http:// or https://"),
                           ("http://a,http://A:80", "URL 2 'http://A:80' is URL 1 again"),
                           ("http://a/api", "no user, path, query or fragment"),
                           ("http://a:0", "port that is not a number in 1..65535"),
                           ("http://a,", "URL 2 '' is empty"),
                           (",".join(f"http://h{i}" for i in range(17)), "more than the limit")):
            with self.assertRaises(ConfigError) as e:
                parse_server_list(text, "CORRAL_SERVER")
            self.assertIn(said, str(e.exception))
            self.assertTrue(str(e.exception).startswith("CORRAL_SERVER: "))

    def test_normalize(self):
        self.assertEqual(normalize_url("http://B:1/"), "http://b:1")
        with self.assertRaises(ValueError):
            normalize_url("b:1")


class LeaderSearchTest(unittest.TestCase):
    def test_next_server_at_once_then_rounds_with_a_doubling_wait(self):
        s = LeaderSearch(["http://a", "http://b"], "", True, 10)
        self.assertEqual((s.url, s.next(REFUSED, 0)), ("http://a", 0))
        self.assertEqual((s.url, s.next(REFUSED, 0)), ("http://b", 0.1))
        self.assertEqual((s.url, s.next(REFUSED, 0)), ("http://a", 0))
        self.assertEqual((s.url, s.next(REFUSED, 0)), ("http://b", 0.2))
        self.assertEqual([retry_wait(n) for n in (1, 2, 3, 4, 5, 9)],
                         [0.1, 0.2, 0.4, 0.8, 1.0, 1.0])

    def test_starts_where_the_last_answer_came_from(self):
        s = LeaderSearch(["http://a", "http://b"], "http://b", True, 10)
        self.assertEqual(s.url, "http://b")
        self.assertIsNone(s.next(Attempt(Outcome.ANSWERED, "HTTP 200"), 0))

    def test_follows_the_leader_a_listed_server_names(self):
        s = LeaderSearch(["http://a", "http://b", "http://c"], "", True, 10)
        s.next(Attempt(Outcome.NOT_LEADER, "503: follower", "http://c"), 0)
        self.assertEqual(s.url, "http://c")
        # Outside the list: followed, then the list from its first entry.
        s = LeaderSearch(["http://a"], "", True, 10)
        s.next(Attempt(Outcome.NOT_LEADER, "503", "http://elsewhere:9"), 0)
        self.assertEqual(s.url, "http://elsewhere:9")
        s.next(Attempt(Outcome.NOT_LEADER, "503", "http://a"), 0)  # not taken at its word
        self.assertEqual(s.url, "http://a")

    def test_https_never_sends_the_token_to_plain_http(self):
        s = LeaderSearch(["https://a", "https://b"], "", True, 10)
        s.next(Attempt(Outcome.NOT_LEADER, "503", "http://evil"), 0)
        self.assertEqual(s.url, "https://b")

    def test_a_submission_lost_after_sending_is_not_sent_again(self):
        s = LeaderSearch(["http://a", "http://b"], "", False, 10)
        with self.assertRaises(ServerUnreachable) as e:
            s.next(Attempt(Outcome.LOST_AFTER_SEND, "no answer: reset"), 0)
        self.assertIn("not sent again", str(e.exception))
        # An idempotent request is.
        s = LeaderSearch(["http://a", "http://b"], "", True, 10)
        self.assertEqual(s.next(Attempt(Outcome.LOST_AFTER_SEND, "reset"), 0), 0)

    def test_gives_up_at_the_deadline_naming_every_url(self):
        s = LeaderSearch(["http://a", "http://b"], "", True, 1)
        self.assertEqual(s.next(REFUSED, 0), 0)  # to b
        self.assertEqual(s.next(REFUSED, 0.5), 0.1)  # a again: a new round
        self.assertEqual(s.next(REFUSED, 0.8), 0)  # b
        with self.assertRaises(ServerUnreachable) as e:  # a after 0.2 s: past the deadline
            s.next(REFUSED, 0.85)
        self.assertEqual(str(e.exception), "cannot reach a leader within 1 s: tried http://a "
                         "(could not connect, 2 times), http://b (could not connect, 2 times)")


if __name__ == "__main__":
    unittest.main()
