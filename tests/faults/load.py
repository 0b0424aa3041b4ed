"""The steady submission load: a thread that submits small jobs through the API, trying the
servers' URLs in turn (issue 16's rule for clients), and records every job id a server
acknowledged. Every job's task stamps its runs in the stamp log (stamps.py)."""
import json
import random
import threading
import time
import urllib.error
import urllib.request

from stamps import task_script


class SubmissionLoad:
    """`submitters` threads each submit one job every `interval` seconds until stop(), so that
    a fault often lands on a submission in flight. Most jobs sleep 0.5-2 s; one in `long_every`
    sleeps `long_s` (a range), long enough to be running when a fault comes; to be running when
    a cut-off node is declared lost, longer than the node timeout."""

    def __init__(self, cluster, stamp_log, long_s, interval=0.6, submitters=2, seed=1,
                 long_every=5, max_restarts=5):
        self.cluster, self.stamp_log, self.interval = cluster, stamp_log, interval
        self.rng = random.Random(seed)
        self.long_s, self.long_every, self.max_restarts = long_s, long_every, max_restarts
        self.acknowledged = []  # job ids, in the order acknowledged
        # time.monotonic() when each acknowledged submission was sent, in acknowledgement order
        self.acknowledged_sent_at = []
        self.refused = {}  # (what was going on, why a submission was not acknowledged) -> count
        self.during = "no fault"  # what was going on: the harness names the fault it injects
        self.start_at = 0  # the index of the URL the next submission tries first
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i, submitters), daemon=True)
                        for i in range(submitters)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join()

    def count(self):
        with self.lock:
            return len(self.acknowledged)

    def acknowledged_after(self, since):
        """The monotonic time at which the first submission sent at or after `since` was
        acknowledged (a reply to one sent before could predate `since`), or None."""
        with self.lock:
            return next((acked for sent, acked in self.acknowledged_sent_at if sent >= since),
                        None)

    def spec(self, n):
        with self.lock:
            seconds = (self.rng.uniform(*self.long_s) if n % self.long_every == 0
                       else self.rng.uniform(0.5, 2))
        return {"name": f"load-{n}",
                "command": ["bash", "-c", task_script(self.stamp_log, seconds)],
                "resources": {"gpus": 1}, "max_restarts": self.max_restarts}

    def submit(self, spec):
        """One submission: tries each URL once, from the one that answered last; a refused
        connection or a 503 moves on to the next. A timeout or a reset after the request was
        sent is not retried (it might have been taken), but the next submission starts at the
        next URL: a frozen server accepts connections and answers none."""
        urls = self.cluster.urls()
        with self.lock:
            start = self.start_at % len(urls)
        why = "no server"
        for i in range(start, start + len(urls)):
            url = urls[i % len(urls)]
            req = urllib.request.Request(url + "/api/v1/jobs", method="POST",
                                         data=json.dumps(spec).encode())
            req.add_header("Authorization", "Bearer " + self.cluster.token)
            req.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    job = json.loads(r.read())["id"]
                with self.lock:
                    self.start_at = i
                return job, None
            except urllib.error.HTTPError as e:
                why = f"HTTP {e.code}"
                if e.code != 503:
                    return None, why
            except OSError as e:  # urllib wraps the socket's error in URLError.reason
                reason = getattr(e, "reason", e)
                if not isinstance(reason, ConnectionRefusedError):
                    with self.lock:
                        self.start_at = i + 1
                    return None, type(reason).__name__
                why = "connection refused"
        return None, why

    def run(self, first, step):
        n = first
        self.stopping.wait(self.interval * first / step)  # the threads take turns
        while not self.stopping.is_set():
            n += step
            sent = time.monotonic()
            job, why = self.submit(self.spec(n))
            with self.lock:
                if job is not None:
                    self.acknowledged.append(job)
                    self.acknowledged_sent_at.append((sent, time.monotonic()))
                else:
                    key = f"{self.during}: {why}"
                    self.refused[key] = self.refused.get(key, 0) + 1
            self.stopping.wait(self.interval)
