"""A mesoshttp framework run against `unisched serve --mesos-addr`.

mesoshttp 0.3.2 (PyPI) is a second Python library for Mesos' v1 scheduler
HTTP API, independent of pymesos: JSON only, and it reads the event stream
one line at a time. Launches TASKS command tasks from the offers it gets
(several per offer when they fit), declines what it does not use, and exits
0 once every task reached TASK_FINISHED (the library acknowledges each
update), printing a JSON summary; non-zero with the reason otherwise. Used by mesos/tests/framework_libraries.rs.
"""

import json
import logging
import sys
import threading

from mesoshttp.client import MesosClient

MASTER = sys.argv[1]
TASKS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
CPUS, MEM = 0.5, 64
FAILED_STATES = ("TASK_FAILED", "TASK_LOST", "TASK_ERROR", "TASK_KILLED", "TASK_DROPPED",
                 "TASK_GONE")

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


def scalar(offer, name):
    return sum(r["scalar"]["value"] for r in offer["resources"] if r["name"] == name)


class Runner:
    def __init__(self):
        self.client = MesosClient(mesos_urls=["http://" + MASTER], frameworkName="mesoshttp-smoke")
        self.client.on(MesosClient.SUBSCRIBED, self.subscribed)
        self.client.on(MesosClient.OFFERS, self.offers)
        self.client.on(MesosClient.UPDATE, self.update)
        self.client.on(MesosClient.ERROR, self.error)
        self.driver = None
        self.framework_id = None
        self.launched = 0
        self.finished = 0
        self.offers_seen = 0
        self.failed = []
        self.urls = set()
        self.done = threading.Event()

    def subscribed(self, driver):
        self.driver = driver
        self.framework_id = driver.frameworkId

    def offers(self, offers):
        for offer in offers:
            self.offers_seen += 1
            o = offer.get_offer()
            # Mesos names the agent's URL in every offer.
            self.urls.add("%s://%s:%d%s" % (o["url"]["scheme"], o["url"]["address"]["ip"],
                                           o["url"]["address"]["port"], o["url"].get("path", "")))
            cpus, mem = scalar(o, "cpus"), scalar(o, "mem")
            tasks = []
            while self.launched < TASKS and cpus >= CPUS and mem >= MEM:
                tasks.append({
                    "name": "mesoshttp task %d" % self.launched,
                    "task_id": {"value": "mh-%d" % self.launched},
                    "agent_id": {"value": o["agent_id"]["value"]},
                    "resources": [
                        {"name": "cpus", "type": "SCALAR", "scalar": {"value": CPUS}},
                        {"name": "mem", "type": "SCALAR", "scalar": {"value": MEM}},
                    ],
                    "command": {"value": "echo hello from $MESOS_TASK_ID > out.txt;"
                                         " test -n \"$MESOS_SANDBOX\""},
                })
                self.launched += 1
                cpus -= CPUS
                mem -= MEM
            if tasks:
                offer.accept(tasks, options={"filters": {"refuse_seconds": 60}})
            else:
                offer.decline(options={"filters": {"refuse_seconds": 60}})

    def update(self, update):
        status = update["status"]
        state = status["state"]
        # The library has acknowledged it already (with its uuid).
        if state == "TASK_FINISHED":
            self.finished += 1
        elif state in FAILED_STATES:
            self.failed.append((status["task_id"]["value"], state, status.get("message")))
        if self.finished + len(self.failed) >= TASKS:
            self.done.set()

    def error(self, message):
        self.failed.append(("framework", "ERROR", str(message)))
        self.done.set()


def main():
    runner = Runner()
    thread = threading.Thread(target=runner.client.register, daemon=True)
    thread.start()
    ok = runner.done.wait(60)
    runner.client.stop = True
    if runner.driver is not None:
        runner.driver.tearDown()
    print(json.dumps({
        "framework_id": runner.framework_id,
        "launched": runner.launched,
        "finished": runner.finished,
        "failed": runner.failed,
        "offers": runner.offers_seen,
        "agent_urls": sorted(runner.urls),
        "timed_out": not ok,
    }))
    sys.exit(0 if ok and runner.finished == TASKS and not runner.failed else 1)


if __name__ == "__main__":
    main()
