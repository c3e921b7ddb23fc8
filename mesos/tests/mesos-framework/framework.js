"use strict";
// A mesos-framework (npm, 0.5.3) scheduler run against `unisched serve
// --mesos-addr`: a Node.js library for Mesos' v1 scheduler HTTP API (JSON),
// which keeps its own task list and launches from its default OFFERS
// handler. TASKS command tasks, one port each; exits 0 once every task
// reached TASK_FINISHED, printing a JSON summary, non-zero otherwise. Used by
// mesos/tests/framework_libraries.rs.

// The library logs into `logs/` under the working directory, and fails
// when there is none.
require("fs").mkdirSync("logs", { recursive: true });
const { Scheduler, Mesos: MesosModule } = require("mesos-framework");

const Mesos = MesosModule.getMesos();
const [host, port] = process.argv[2].split(":");
const TASKS = parseInt(process.argv[3] || "4", 10);
const FAILED = ["TASK_FAILED", "TASK_LOST", "TASK_ERROR", "TASK_KILLED", "TASK_DROPPED", "TASK_GONE"];

let frameworkId = null;
let finished = 0;
let offers = 0;
const failed = [];
const agentIps = new Set();
let over = false;

const scheduler = new Scheduler({
  masterUrl: host,
  port: parseInt(port, 10),
  frameworkName: "mesos-framework-smoke",
  logging: { level: "warn" },
  tasks: {
    hello: {
      priority: 1,
      instances: TASKS,
      commandInfo: new Mesos.CommandInfo(null, null, true,
        "echo hello from $MESOS_TASK_ID > out.txt; test -n \"$MESOS_SANDBOX\"", null, null),
      resources: { cpus: 0.5, mem: 64, ports: 1, disk: 0 },
    },
  },
});

function finish(reason) {
  if (over) {
    return;
  }
  over = true;
  const ok = finished === TASKS && failed.length === 0;
  console.log(JSON.stringify({ framework_id: frameworkId, finished, failed, offers,
    agent_ips: [...agentIps].sort(), reason }));
  scheduler.teardown();
  // The library subscribes again when its stream ends: leave before that.
  setTimeout(() => process.exit(ok ? 0 : 1), 200);
}

scheduler.on("subscribed", (s) => { frameworkId = s.frameworkId; });
scheduler.on("offers", (event) => {
  for (const offer of event.offers) {
    offers += 1;
    agentIps.add(offer.url.address.ip);
  }
});
scheduler.on("update", (update) => {
  const status = update.status;
  if (status.state === "TASK_FINISHED") {
    finished += 1;
  } else if (FAILED.includes(status.state)) {
    failed.push([status.task_id.value, status.state, status.message]);
  }
  if (finished + failed.length >= TASKS) {
    finish("done");
  }
});
scheduler.on("error", (e) => {
  if (!over) {
    failed.push(["framework", "error", e.message || JSON.stringify(e)]);
  }
});
scheduler.on("ready", () => scheduler.subscribe());
setTimeout(() => finish("timed out"), 60000);
