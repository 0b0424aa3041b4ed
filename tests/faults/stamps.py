"""The stamp log: every run of a load task appends `start JOB TASK GENERATION TIME NODE` when it
begins and `stop JOB TASK GENERATION TIME HOW` when it ends (HOW: "end", or "term" when it was
stopped), to one file that every namespace shares (namespaces share the filesystem). The agent
gives a task its run in CORRAL_GENERATION. Times are the wall clock (one machine, one clock),
read by bash's EPOCHREALTIME: a builtin, so a stamp needs no fork (a `date` that failed under
load once left a start stamp without its time)."""


def task_script(log, seconds):
    """The shell script of a load task that sleeps `seconds`. The trap is set before the start
    stamp, so a run stopped at any point after its start stamp writes its stop stamp."""
    key = "$CORRAL_JOB_ID $CORRAL_TASK_INDEX $CORRAL_GENERATION"
    return (f"trap 'echo \"stop {key} $EPOCHREALTIME term\" >> {log}; exit 143' TERM INT; "
            f"echo \"start {key} $EPOCHREALTIME $CORRAL_NODE_NAME\" >> {log}; "
            f"sleep {seconds:.2f} & wait $!; "
            f"echo \"stop {key} $EPOCHREALTIME end\" >> {log}")


class Run:
    def __init__(self, job, task, generation, start, node):
        self.job, self.task, self.generation = job, task, generation
        self.start, self.node = start, node
        self.stop = None  # none: no stop stamp (still running, or SIGKILLed)
        self.how = None

    def end(self, now):
        return self.stop if self.stop is not None else now


def read_runs(path):
    """The runs of the stamp log, in start order, the number of stop stamps without a start (a
    run stopped before it stamped its start: harmless) and the lines that are not stamps (a
    checker that cannot read a stamp may miss an overlap: the harness fails on them)."""
    runs, open_runs, orphans, malformed = [], {}, 0, []
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        parts = line.split()
        try:
            if len(parts) != 6 or parts[0] not in ("start", "stop"):
                raise ValueError
            key, when = (int(parts[1]), int(parts[2]), int(parts[3])), float(parts[4])
        except ValueError:
            malformed.append(line)
            continue
        if parts[0] == "start":
            run = Run(*key, when, parts[5])
            runs.append(run)
            open_runs.setdefault(key, []).append(run)
        else:
            waiting = open_runs.get(key)
            if waiting:
                run = waiting.pop(0)
                run.stop, run.how = when, parts[5]
            else:
                orphans += 1
    return runs, orphans, malformed


def overlaps(runs, now):
    """Pairs of runs of one task (job, task index) whose times intersect: [(a, b, seconds)]. Two
    starts of one generation count too (one run started twice). A run without a stop stamp is
    taken to run until `now`."""
    by_task = {}
    for r in runs:
        by_task.setdefault((r.job, r.task), []).append(r)
    found = []
    for task_runs in by_task.values():
        task_runs.sort(key=lambda r: r.start)
        for i, a in enumerate(task_runs):
            for b in task_runs[i + 1:]:
                seconds = min(a.end(now), b.end(now)) - max(a.start, b.start)
                if seconds > 0:
                    found.append((a, b, seconds))
    return found
