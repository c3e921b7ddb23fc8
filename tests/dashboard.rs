//! The built-in dashboard in a real headless browser (chromium through
//! chromedriver) against a running `unisched serve` with a simulated
//! cluster: a YuniKorn-style RM over gRPC with queues, nodes and
//! applications, and the Mesos master with simulated agents and a framework
//! running a task. The page must load, show the queues, nodes, agents,
//! framework, task and offers, link the Mesos endpoints, follow the events
//! stream, and log no script error.

mod browser;
mod local_serve;

use std::time::Duration;

use browser::cluster::{WITHIN, framework, serve, simulated_rm, submit};
use serde_json::Value;

/// What the page shows, read from its elements.
const READ_PAGE: &str = "
    const d = window.unischedDashboard;
    const all = (sel, key) => [...document.querySelectorAll(sel)].map(e => e.dataset[key]);
    return {
        ready: !!(d && d.ready),
        errors: d ? d.errors : ['no dashboard state'],
        events: d ? d.events : 0,
        queues: all('[data-queue]', 'queue'),
        nodes: all('[data-node]', 'node'),
        apps: all('[data-app]', 'app'),
        agents: all('[data-agent]', 'agent'),
        frameworks: all('[data-framework]', 'framework'),
        tasks: all('[data-task]', 'task'),
        offers: all('[data-offer]', 'offer'),
        links: [...document.querySelectorAll('[data-mesos-link]')].map(a => a.getAttribute('href')),
        charts: document.querySelectorAll('.chart svg').length,
        chartPoints: [...document.querySelectorAll('.chart polyline')]
            .map(l => l.getAttribute('points').split(' ').length),
    };";

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn dashboard_shows_queues_nodes_and_the_mesos_side_without_script_errors() {
    let Some(browser) = browser::Browser::start("dashboard browser test") else {
        return;
    };
    let server = serve();
    let (rm, callback) = simulated_rm(&server.grpc);
    let _subscription = framework(&server.mesos);

    browser.goto(&format!("http://{}/", server.http));
    let page = browser.wait_for(WITHIN, READ_PAGE, |v| {
        let has = |field: &str, want: &[&str]| {
            let got = strings(&v[field]);
            want.iter().all(|w| got.iter().any(|g| g == w))
        };
        v["ready"] == true
            && has("queues", &["root", "root.prod", "root.dev"])
            && has("nodes", &["worker-1", "worker-2", "worker-3", "worker-4"])
            && has("apps", &["spark-etl", "notebook"])
            && strings(&v["agents"]).len() == 3
            && strings(&v["frameworks"]).len() == 1
            && has("tasks", &["dashboard-task-1"])
            && !strings(&v["offers"]).is_empty()
            && v["events"].as_u64().unwrap_or(0) > 0
    });
    assert_eq!(page["charts"], 2, "{page}");
    let mesos_port = server.mesos.rsplit(':').next().unwrap();
    let links = strings(&page["links"]);
    for path in [
        "/state",
        "/metrics/snapshot",
        "/master/state",
        "/master/redirect",
        "/health",
    ] {
        assert!(
            links
                .iter()
                .any(|l| l.ends_with(&format!(":{mesos_port}{path}"))),
            "no link to the master's {path}: {links:?}"
        );
    }

    // The history charts grow as the server samples (every second here).
    browser.wait_for(WITHIN, READ_PAGE, |v| {
        v["chartPoints"]
            .as_array()
            .is_some_and(|c| c.len() == 2 && c.iter().all(|n| n.as_u64() >= Some(4)))
    });

    // Live: a new application shows up without a reload.
    submit(&rm, &callback, "late-arrival", "root.dev", 1);
    assert_eq!(callback.wait_for_allocations(5, WITHIN), 5);
    browser.wait_for(WITHIN, READ_PAGE, |v| {
        strings(&v["apps"]).iter().any(|a| a == "late-arrival")
    });

    if let Some(path) = std::env::var_os("UNISCHED_DASHBOARD_SCREENSHOT") {
        browser.resize(1400, 2600);
        std::thread::sleep(Duration::from_millis(500));
        browser.screenshot(std::path::Path::new(&path));
    }
    let page = browser.eval(READ_PAGE);
    assert_eq!(
        page["errors"],
        serde_json::json!([]),
        "script errors: {page}"
    );
    let severe = browser.console_errors();
    assert!(severe.is_empty(), "the browser logged errors: {severe:?}");
    drop(rm);
}
