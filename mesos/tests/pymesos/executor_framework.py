"""A pymesos framework with its own executor, run against `unisched serve`.

The scheduler (pymesos' MesosSchedulerDriver) launches TASKS tasks that
name an executor of its own: this same file run with `executor` as its
only argument, on pymesos' MesosExecutorDriver, which speaks Mesos' v1
executor HTTP API to the agent (MESOS_AGENT_ENDPOINT). One executor per
agent; each runs its tasks on threads: TASK_RUNNING, a file
`<task id>/out.txt` in its sandbox, a framework message to the scheduler,
TASK_FINISHED. The scheduler answers each message with one of its own,
which the executor records. Exits 0 once every task finished and every
message came, printing a JSON summary last; non-zero otherwise. Used by
mesos/tests/framework_libraries.rs.
"""

import json
import logging
import os
import sys
import threading
import time

from addict import Dict
from pymesos import (Executor, MesosExecutorDriver, MesosSchedulerDriver, Scheduler,
                     decode_data, encode_data)

CPUS, MEM = 0.5, 64
EXECUTOR_CPUS, EXECUTOR_MEM = 0.1, 32
FAILED_STATES = ("TASK_FAILED", "TASK_LOST", "TASK_ERROR", "TASK_KILLED", "TASK_DROPPED",
                 "TASK_GONE")

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


class TaskRunner(Executor):
    def launchTask(self, driver, task):
        def run():
            driver.sendStatusUpdate(Dict(task_id=task.task_id, state="TASK_RUNNING"))
            os.makedirs(task.task_id.value, exist_ok=True)
            with open(os.path.join(task.task_id.value, "out.txt"), "w") as out:
                out.write("hello from %s\n" % task.task_id.value)
            driver.sendFrameworkMessage(encode_data(task.task_id.value.encode()))
            driver.sendStatusUpdate(Dict(task_id=task.task_id, state="TASK_FINISHED"))
        threading.Thread(target=run, daemon=True).start()

    def frameworkMessage(self, driver, message):
        with open("replies.txt", "a") as replies:
            replies.write(decode_data(message).decode() + "\n")


class Runner(Scheduler):
    def __init__(self, tasks):
        self.tasks = tasks
        self.launched = 0
        self.finished = 0
        self.failed = []
        self.messages = []
        self.executors = set()
        self.framework_id = None
        self.lock = threading.Lock()
        self.done = threading.Event()

    def registered(self, driver, framework_id, master_info):
        self.framework_id = framework_id.value

    def resourceOffers(self, driver, offers):
        for offer in offers:
            cpus = sum(r.scalar.value for r in offer.resources if r.name == "cpus")
            mem = sum(r.scalar.value for r in offer.resources if r.name == "mem")
            executor = Dict()
            executor.executor_id.value = "runner-" + offer.agent_id.value
            executor.name = "pymesos task runner"
            executor.command.value = "%s %s executor" % (sys.executable,
                                                          os.path.abspath(__file__))
            executor.resources = [
                Dict(name="cpus", type="SCALAR", scalar=Dict(value=EXECUTOR_CPUS)),
                Dict(name="mem", type="SCALAR", scalar=Dict(value=EXECUTOR_MEM)),
            ]
            if executor.executor_id.value not in self.executors:
                cpus -= EXECUTOR_CPUS
                mem -= EXECUTOR_MEM
            tasks = []
            while self.launched < self.tasks and cpus >= CPUS and mem >= MEM:
                task = Dict()
                task.task_id.value = "pe-%d" % self.launched
                task.name = "pymesos executor task %d" % self.launched
                task.agent_id.value = offer.agent_id.value
                task.executor = executor
                task.resources = [
                    Dict(name="cpus", type="SCALAR", scalar=Dict(value=CPUS)),
                    Dict(name="mem", type="SCALAR", scalar=Dict(value=MEM)),
                ]
                tasks.append(task)
                self.launched += 1
                cpus -= CPUS
                mem -= MEM
            if tasks:
                self.executors.add(executor.executor_id.value)
                driver.launchTasks(offer.id, tasks, Dict(refuse_seconds=60))
            else:
                driver.declineOffer(offer.id, Dict(refuse_seconds=60))

    def statusUpdate(self, driver, update):
        with self.lock:
            if update.state == "TASK_FINISHED":
                self.finished += 1
            elif update.state in FAILED_STATES:
                self.failed.append((update.task_id.value, update.state, update.get("message")))
            self.check()

    def frameworkMessage(self, driver, executor_id, agent_id, message):
        with self.lock:
            task = decode_data(message).decode()
            self.messages.append(task)
            driver.sendFrameworkMessage(executor_id, agent_id, encode_data(("thanks " + task).encode()))
            self.check()

    def check(self):
        if (self.finished == self.tasks and len(self.messages) == self.tasks) or self.failed:
            self.done.set()

    def error(self, driver, message):
        self.failed.append(("framework", "ERROR", message))
        self.done.set()


def main():
    if sys.argv[1:] == ["executor"]:
        MesosExecutorDriver(TaskRunner(), use_addict=True).run()
        return
    master, tasks = sys.argv[1], int(sys.argv[2])
    framework = Dict()
    framework.user = os.environ.get("USER", "root") or "root"
    framework.name = "pymesos-executor-smoke"
    framework.hostname = "localhost"
    runner = Runner(tasks)
    driver = MesosSchedulerDriver(runner, framework, master, use_addict=True)
    driver.start()
    ok = runner.done.wait(60)
    # The executors' replies to the last messages are on their way.
    time.sleep(0.5)
    driver.stop()
    driver.join()
    print(json.dumps({
        "framework_id": runner.framework_id,
        "launched": runner.launched,
        "finished": runner.finished,
        "failed": runner.failed,
        "messages": sorted(runner.messages),
        "executors": sorted(runner.executors),
        "timed_out": not ok,
    }))
    sys.exit(0 if ok and runner.finished == tasks and not runner.failed else 1)


if __name__ == "__main__":
    main()
