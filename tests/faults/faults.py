"""The faults, a plug-in list (FAULTS): each kind injects one fault into a running cluster, holds
it, heals it, and leaves recovery to the harness (fault_run.py), which then checks that every
process is up and every node ready. A kind names what it needs ("netns": agents in network
namespaces; "postgres"; "small_disk": the data folder on its own small filesystem) and is skipped
with a message where that is missing; "servers2": two servers or more on one PostgreSQL). To add
one: subclass Fault, set `kind` and `needs`, write inject(), add it to FAULTS.

Durations are stated in terms of the cluster's node timeout (cluster.node_timeout):
short partitions last SHORT_CUT_S, well under it; long ones last the node timeout plus LONG_EXTRA_S.
"""
import os
import signal
import time

from cluster import wait_for

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


FAILOVER_WAIT_S = 30  # how long a leader fault waits for another server to lead


class ServerSigkill(Fault):
    """SIGKILL of any server (one of several: a leader or a follower), started again at once."""
    kind = "server_sigkill"

    def inject(self):
        server = self.h.rng.choice(self.h.cluster.servers)
        role = server.role() or "?"
        server.signal(signal.SIGKILL)
        down = time.monotonic()
        if not server.start():
            raise RuntimeError(f"{server.name} did not come back after SIGKILL")
        return server.name, f"({role}) down {time.monotonic() - down:.1f} s"


class LeaderFault(Fault):
    """A fault of the leader of several servers: how long until another server leads and a
    submission is acknowledged again (the failover time, recorded in the harness's
    `failovers`)."""
    needs = ("servers2",)

    def leader(self):
        leader = self.h.cluster.leader()
        if leader is None:
            raise RuntimeError("no server leads")
        return leader

    def wait_takeover(self, old):
        """Waits until a server other than `old` leads."""
        c = self.h.cluster
        if not wait_for(lambda: any(s is not old and s.role() == "leader" for s in c.servers),
                        FAILOVER_WAIT_S):
            raise RuntimeError(f"no server took over from {old.name} in {FAILOVER_WAIT_S} s")

    def wait_acknowledged(self, since_monotonic):
        """Waits until the load has a submission acknowledged after `since_monotonic` (the
        fault); records and returns the seconds from the fault to it (the failover time)."""
        acked = wait_for(lambda: self.h.load.acknowledged_after(since_monotonic),
                         FAILOVER_WAIT_S)
        if not acked:
            raise RuntimeError(f"no submission acknowledged in {FAILOVER_WAIT_S} s after the "
                               "leader's fault")
        seconds = acked - since_monotonic
        self.h.failovers.append((self.kind, seconds))
        return seconds


class LeaderSigkill(LeaderFault):
    """SIGKILL of the leader: a follower takes the lease when it lapses; the killed server is
    started again (as a follower) once that happened."""
    kind = "leader_sigkill"

    def inject(self):
        old = self.leader()
        old.signal(signal.SIGKILL)
        since = time.monotonic()
        self.wait_takeover(old)
        seconds = self.wait_acknowledged(since)
        if not old.start():
            raise RuntimeError(f"{old.name} did not come back after SIGKILL")
        return old.name, f"failover {seconds:.2f} s"


class LeaderSigstop(LeaderFault):
    """SIGSTOP of the leader until another server has led for STOPPED_AFTER_TAKEOVER_S, then
    SIGCONT: the old leader, whose lease lapsed by its own clock, must exit with status 3
    (docs/control-plane.md, "Losing the lease") having changed nothing, and is started again as
    a supervisor would."""
    kind = "leader_sigstop"
    STOPPED_AFTER_TAKEOVER_S = 1.0

    def inject(self):
        old = self.leader()
        old.signal(signal.SIGSTOP)
        since = time.monotonic()
        try:
            self.wait_takeover(old)
            self.hold(self.STOPPED_AFTER_TAKEOVER_S)
        finally:
            old.signal(signal.SIGCONT)
        if not wait_for(lambda: not old.alive(), FAILOVER_WAIT_S):
            raise RuntimeError(f"{old.name} still runs {FAILOVER_WAIT_S} s after it woke with "
                               "its lease lost")
        if old.proc.returncode != 3:
            raise RuntimeError(f"{old.name} exited with {old.proc.returncode}, not 3 (lease "
                               f"lost), after it woke: see {old.log}")
        if not old.start():
            raise RuntimeError(f"{old.name} did not come back after its lease was lost")
        seconds = self.wait_acknowledged(since)
        return old.name, f"failover {seconds:.2f} s; woke and exited with status 3"


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


FAULTS = [ServerSigkill, LeaderSigkill, LeaderSigstop, AgentSigkill, PartitionBothShort, PartitionOneWayShort,
          PartitionBothLong, PartitionOneWayLong, PostgresRestart, DiskFull]
