"""The faults, a plug-in list (FAULTS): each kind injects one fault into a running cluster, holds
it, heals it, and leaves recovery to the harness (fault_run.py), which then checks that every
process is up and every node ready. A kind names what it needs ("netns": agents in network
namespaces; "postgres"; "small_disk": the data folder on its own small filesystem) and is skipped
with a message where that is missing. To add one (the leader SIGKILL and SIGSTOP of the election
branch): subclass Fault, set `kind` and `needs`, write inject(), add it to FAULTS.

Durations are stated in terms of the cluster's node timeout (cluster.node_timeout):
short partitions last SHORT_CUT_S, well under it; long ones last the node timeout plus LONG_EXTRA_S.
"""
import os
import signal
import time

SHORT_CUT_S = 1.0  # a short partition: the node must not be declared lost
LONG_EXTRA_S = 4.0  # a long partition outlasts the node timeout by this much
PG_DOWN_S = 1.0  # PostgreSQL stays down this long before it is started again
DISK_FULL_S = 3.0  # the data folder stays full this long, under the load


class Fault:
    kind = ""
    needs = ()

    def __init__(self, harness):
        self.h = harness
        self.injected = 0

    def inject(self):
        """Injects and heals one fault; returns (what was hit: a node, server or service name,
        a short description)."""
        raise NotImplementedError

    def hold(self, seconds):
        """Keeps the fault in place for `seconds` while the load goes on: the time is the fault."""
        time.sleep(seconds)


class ServerSigkill(Fault):
    kind = "server_sigkill"

    def inject(self):
        server = self.h.cluster.leader() or self.h.cluster.servers[0]
        server.signal(signal.SIGKILL)
        down = time.monotonic()
        if not server.start():
            raise RuntimeError(f"{server.name} did not come back after SIGKILL")
        return server.name, f"down {time.monotonic() - down:.1f} s"


class AgentSigkill(Fault):
    kind = "agent_sigkill"

    def inject(self):
        agent = self.h.rng.choice(self.h.cluster.agents)
        agent.kill9()
        agent.start()
        return agent.name, "restarted at once"


class Partition(Fault):
    """Cuts one agent off from the servers (iptables in its namespace) for a while."""
    needs = ("netns",)
    directions = ("both",)
    long = False

    def inject(self):
        c = self.h.cluster
        agent = self.h.rng.choice(c.agents)
        direction = self.directions[self.injected % len(self.directions)]
        seconds = c.node_timeout + LONG_EXTRA_S if self.long else SHORT_CUT_S
        c.network.cut(agent.index, direction)
        try:
            self.hold(seconds)
        finally:
            c.network.heal(agent.index, direction)
        return agent.name, f"{direction} {seconds:.1f} s"


class PartitionBothShort(Partition):
    kind = "partition_both_short"


class PartitionOneWayShort(Partition):
    kind = "partition_oneway_short"
    directions = ("out", "in")


class PartitionBothLong(Partition):
    kind = "partition_both_long"
    long = True


class PartitionOneWayLong(Partition):
    kind = "partition_oneway_long"
    directions = ("out", "in")
    long = True


class PostgresRestart(Fault):
    """PostgreSQL stopped (alternately "fast", which ends sessions cleanly, and "immediate", a
    crash that recovers from its WAL at the next start) and started again."""
    kind = "postgres_restart"
    needs = ("postgres",)

    def inject(self):
        pg = self.h.cluster.postgres
        mode = ("fast", "immediate")[self.injected % 2]
        pg.stop(mode)
        self.hold(PG_DOWN_S)
        pg.start()
        return "postgres", f"-m {mode}, down {PG_DOWN_S:.1f} s"


class DiskFull(Fault):
    """The servers' data folder (and with SQLite the store's file) full: a file fills its small
    filesystem to the last byte for DISK_FULL_S under the load, then goes."""
    kind = "disk_full"
    needs = ("small_disk",)

    def inject(self):
        filler = os.path.join(self.h.cluster.data_root, "filler")
        chunk = b"\0" * (1 << 20)
        with open(filler, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(chunk)
            except OSError:
                pass
            try:
                while True:  # the last partial MiB
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        try:
            self.hold(DISK_FULL_S)
        finally:
            os.unlink(filler)
        return "data folder", f"{DISK_FULL_S:.1f} s full"


FAULTS = [ServerSigkill, AgentSigkill, PartitionBothShort, PartitionOneWayShort,
          PartitionBothLong, PartitionOneWayLong, PostgresRestart, DiskFull]
