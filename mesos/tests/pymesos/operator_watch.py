"""pymesos' operator driver (MesosOperatorMasterDriver) against
`unisched serve --mesos-addr`: it subscribes to the master's operator event
stream, makes the read-only calls, reserves and unreserves an agent's
resources, changes weights and quota, watches a small framework (a
pymesos scheduler in this process) run one task and go, and marks an agent
gone. Prints a JSON
summary of what it saw; exits non-zero when something is missing. Used by
mesos/tests/framework_libraries.rs.
"""

import json
import sys
import threading
import time

from addict import Dict
from pymesos import MesosSchedulerDriver, Scheduler
from pymesos.interface import OperatorMaster
from pymesos.operator_v1 import MesosOperatorMasterDriver

MASTER = sys.argv[1]


class Watcher(OperatorMaster):
    def __init__(self):
        self.events = []
        self.lock = threading.Lock()
        self.removed = threading.Event()

    def _note(self, kind, detail):
        with self.lock:
            self.events.append([kind, detail])

    def taskAdded(self, task_info):
        self._note("TASK_ADDED", task_info["task_id"]["value"])

    def taskUpdated(self, task_info):
        self._note("TASK_UPDATED", task_info["state"])

    def frameworkAdded(self, framework_info):
        self._note("FRAMEWORK_ADDED", framework_info["framework_info"]["name"])

    def frameworkUpdated(self, framework_info):
        self._note("FRAMEWORK_UPDATED", framework_info["framework_info"]["name"])

    def frameworkRemoved(self, framework_info):
        self._note("FRAMEWORK_REMOVED", framework_info["name"])
        self.removed.set()

    def agentAdded(self, agent_info):
        self._note("AGENT_ADDED", agent_info["agent_info"]["hostname"])

    def agentRemoved(self, agent_id):
        self._note("AGENT_REMOVED", agent_id)


class Driver(MesosOperatorMasterDriver):
    """Notes when the subscription is open (SUBSCRIBED came)."""

    def __init__(self, *args, **kwargs):
        super(Driver, self).__init__(*args, **kwargs)
        self.subscribed = threading.Event()
        self.agents_at_start = None

    def on_subscribed(self, info):
        self.agents_at_start = len(info["get_state"]["get_agents"]["agents"])
        self.subscribed.set()


class OneTask(Scheduler):
    def __init__(self):
        self.launched = False
        self.done = threading.Event()

    def resourceOffers(self, driver, offers):
        for offer in offers:
            if self.launched:
                driver.declineOffer(offer.id)
                continue
            task = Dict()
            task.task_id.value = "op-task"
            task.agent_id.value = offer.agent_id.value
            task.name = "operator watched task"
            task.command.value = "true"
            task.resources = [
                dict(name="cpus", type="SCALAR", scalar={"value": 0.5}),
                dict(name="mem", type="SCALAR", scalar={"value": 64}),
            ]
            driver.launchTasks(offer.id, [task])
            self.launched = True

    def statusUpdate(self, driver, update):
        if update.state == "TASK_FINISHED":
            self.done.set()


def reserved_on(operator, agent_id):
    """The reserved scalars of an agent in GET_AGENTS, by role."""
    out = {}
    for agent in operator.getAgents()["get_agents"]["agents"]:
        if agent["agent_info"]["id"]["value"] != agent_id:
            continue
        for r in agent.get("total_resources", []):
            if r.get("reservations"):
                role = r["reservations"][-1]["role"]
                out[role] = out.get(role, 0) + r["scalar"]["value"]
    return out


def main():
    watcher = Watcher()
    operator = Driver(MASTER, operator=watcher)
    operator.start()
    summary = {"subscribed": operator.subscribed.wait(10)}
    summary["agents_at_start"] = operator.agents_at_start
    summary["healthy"] = operator.getHealth()["get_health"]["healthy"]
    summary["version"] = operator.getVersion()["get_version"]["version_info"]["version"]
    summary["agents"] = len(operator.getAgents()["get_agents"]["agents"])
    summary["master_pid"] = operator.getMaster()["get_master"]["master_info"]["pid"]
    quota = operator.getQuota()["get_quota"]["status"].get("configs", [])
    summary["quota"] = {c["role"]: c.get("limits", {}) for c in quota}

    # A dynamic reservation an operator makes and takes back.
    agent_id = operator.getAgents()["get_agents"]["agents"][0]["agent_info"]["id"]["value"]
    reserved_cpu = [dict(name="cpus", type="SCALAR", scalar={"value": 0.5},
                         reservations=[dict(type="DYNAMIC", role="ops")])]
    operator.reserveResources(agent_id, reserved_cpu)
    summary["reserved"] = reserved_on(operator, agent_id)
    operator.unreserveResources(agent_id, reserved_cpu)
    summary["reserved_after"] = reserved_on(operator, agent_id)

    # Weights and quota changed at run time, with the driver's own calls.
    operator.updateWeights([{"role": "ops", "weight": 2.0}])
    weights = operator.getWeights()["get_weights"].get("weight_infos", [])
    summary["weights"] = {w["role"]: w["weight"] for w in weights}
    cpus = dict(name="cpus", type="SCALAR", scalar={"value": 1})
    operator.setQuota({"role": "batch", "guarantee": [cpus]})
    quota = operator.getQuota()["get_quota"]["status"].get("configs", [])
    summary["quota_set"] = sorted(c["role"] for c in quota)
    try:
        operator.setQuota({"role": "ops", "guarantee": [cpus]})
        summary["refused"] = None
    except RuntimeError as e:
        summary["refused"] = str(e)
    operator.removeQuota("batch")
    quota = operator.getQuota()["get_quota"]["status"].get("configs", [])
    summary["quota_removed"] = sorted(c["role"] for c in quota)

    framework = Dict()
    framework.user = "root"
    framework.name = "watched"
    framework.role = "ops"
    scheduler = OneTask()
    driver = MesosSchedulerDriver(scheduler, framework, MASTER, use_addict=True)
    driver.start()
    summary["task_finished"] = scheduler.done.wait(30)
    state = operator.getState()["get_state"]
    summary["state_frameworks"] = len(state["get_frameworks"].get("frameworks", []))
    roles = operator.getRoles()["get_roles"].get("roles", [])
    summary["roles"] = sorted(r["name"] for r in roles)
    driver.stop()
    driver.join()
    summary["removed_seen"] = watcher.removed.wait(10)
    tasks = operator.getTasks()["get_tasks"]
    summary["completed_tasks"] = [t["state"] for t in tasks.get("completed_tasks", [])]

    # The master's logging level, raised for a while.
    operator.setLoggingLevel(1, 60 * 10**9)
    summary["logging_level"] = operator.getLoggingLevel()["get_logging_level"]["level"]

    # An agent marked gone leaves for good (twice is no error, as upstream).
    operator.markAgentGone(agent_id)
    operator.markAgentGone(agent_id)
    agents = operator.getAgents()["get_agents"]["agents"]
    summary["agents_after_gone"] = [a["agent_info"]["id"]["value"] for a in agents]
    summary["gone"] = agent_id
    deadline = time.time() + 10
    while time.time() < deadline:
        with watcher.lock:
            if ["AGENT_REMOVED", agent_id] in watcher.events:
                break
        time.sleep(0.05)
    with watcher.lock:
        summary["events"] = list(watcher.events)
    operator.stop()
    print(json.dumps(summary))
    ok = summary["subscribed"] and summary["task_finished"] and summary["removed_seen"]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
