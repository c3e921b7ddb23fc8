"""A pymesos framework run against `unisched serve --mesos-addr`.

Launches TASKS command tasks from the offers it gets (several per offer when
they fit), declines what it does not use, acknowledges every update (pymesos
does it implicitly), and exits 0 once every task reached TASK_FINISHED;
non-zero with the reason otherwise. Used by mesos/tests/framework_libraries.rs (which says how to install
pymesos).
"""

import json
import os
import sys
import threading
import time
import uuid

from pymesos import MesosSchedulerDriver, Scheduler, encode_data
from addict import Dict

MASTER = sys.argv[1]
TASKS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
CPUS, MEM = 0.5, 64


def scalar(offer, name):
    return sum(r.scalar.value for r in offer.resources if r.name == name)


class Runner(Scheduler):
    def __init__(self):
        self.launched = 0
        self.finished = 0
        self.failed = []
        self.offers = 0
        self.declined = 0
        self.states = {}
        self.framework_id = None
        self.done = threading.Event()

    def registered(self, driver, framework_id, master_info):
        self.framework_id = framework_id.value

    def resourceOffers(self, driver, offers):
        for offer in offers:
            self.offers += 1
            cpus, mem = scalar(offer, "cpus"), scalar(offer, "mem")
            tasks = []
            while self.launched < TASKS and cpus >= CPUS and mem >= MEM:
                task = Dict()
                task.task_id.value = "task-%d" % self.launched
                task.agent_id.value = offer.agent_id.value
                task.name = "pymesos task %d" % self.launched
                task.command.value = "echo hello from $MESOS_TASK_ID > out.txt; test -n \"$MESOS_SANDBOX\""
                task.resources = [
                    dict(name="cpus", type="SCALAR", scalar={"value": CPUS}),
                    dict(name="mem", type="SCALAR", scalar={"value": MEM}),
                ]
                tasks.append(task)
                self.launched += 1
                cpus -= CPUS
                mem -= MEM
            if tasks:
                driver.launchTasks(offer.id, tasks, filters={"refuse_seconds": 60})
            else:
                self.declined += 1
                driver.declineOffer(offer.id, filters={"refuse_seconds": 60})

    def statusUpdate(self, driver, update):
        self.states[update.task_id.value] = update.state
        if update.state == "TASK_FINISHED":
            self.finished += 1
        elif update.state in ("TASK_FAILED", "TASK_LOST", "TASK_ERROR", "TASK_KILLED",
                              "TASK_DROPPED", "TASK_GONE"):
            self.failed.append((update.task_id.value, update.state, update.get("message")))
        if self.finished + len(self.failed) >= TASKS:
            self.done.set()

    def error(self, driver, message):
        self.failed.append(("framework", "ERROR", message))
        self.done.set()


def main():
    framework = Dict()
    framework.user = os.environ.get("USER", "root") or "root"
    framework.name = "pymesos-smoke"
    framework.role = "pymesos"
    framework.hostname = "localhost"
    runner = Runner()
    # With a credential in the environment, every call carries it (HTTP
    # Basic), as for a master run with --authenticate_http_frameworks.
    driver = MesosSchedulerDriver(
        runner,
        framework,
        MASTER,
        use_addict=True,
        principal=os.environ.get("FRAMEWORK_PRINCIPAL"),
        secret=os.environ.get("FRAMEWORK_SECRET"),
    )
    driver.start()
    ok = runner.done.wait(60)
    driver.stop()
    driver.join()
    summary = {
        "framework_id": runner.framework_id,
        "launched": runner.launched,
        "finished": runner.finished,
        "failed": runner.failed,
        "offers": runner.offers,
        "declined": runner.declined,
        "states": runner.states,
        "timed_out": not ok,
    }
    print(json.dumps(summary))
    sys.exit(0 if ok and runner.finished == TASKS and not runner.failed else 1)


if __name__ == "__main__":
    main()
