"""Hostile clients shared by tests/security/ and bench/flood_bench.py: connection floods from
another address of this host, and the server's peak memory."""
import socket
import threading

# Another address of this host (all of 127/8 is loopback): the attacker's, so that per-address
# caps tell it from the users and agents on 127.0.0.1.
ATTACKER = "127.0.0.2"


def peak_rss_mib(pid):
    """The process's peak resident memory so far (VmHWM), in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def attacker_socket(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((ATTACKER, 0))
    s.setblocking(False)
    try:
        s.connect((host, port))
    except BlockingIOError:
        pass
    return s


class Flood:
    """`slow` connections that send a request head a byte a second and `idle` ones that send
    nothing, each opened again when the server closes it, until stop()."""

    def __init__(self, host, port, slow, idle):
        self.host, self.port, self.slow, self.idle = host, port, slow, idle
        self.head = (b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 4000)
        self.reopened = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        conns = [[attacker_socket(self.host, self.port), 0] for _ in range(self.slow)]
        idle = [attacker_socket(self.host, self.port) for _ in range(self.idle)]
        while not self.stopping.is_set():
            for conn in conns:
                try:
                    conn[0].send(self.head[conn[1] % len(self.head):][:1])
                    conn[1] += 1
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:  # closed by the server (a deadline or a cap): open another
                    conn[0].close()
                    conn[0], conn[1] = attacker_socket(self.host, self.port), 0
                    self.reopened += 1
            for i, s in enumerate(idle):
                try:
                    if s.recv(1, socket.MSG_PEEK) == b"":
                        raise OSError("closed")
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    s.close()
                    idle[i] = attacker_socket(self.host, self.port)
                    self.reopened += 1
            self.stopping.wait(1.0)
        for conn in conns:
            conn[0].close()
        for s in idle:
            s.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join()


