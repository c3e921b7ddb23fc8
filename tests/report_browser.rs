//! Opens a simulate report in a real headless browser (Debian's
//! `chromium`) and checks it renders: the browser loads it from a file with
//! no network, every chart is in the DOM it built, and a screenshot is taken.
//! Skipped, saying so, where chromium is not installed.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use unisched::simulate::{self, NamedConfig, SimulateOptions, TraceFormat, TraceInput};
use unisched::trace::ImportOptions;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|dir| Path::new(dir).join(name))
            .find(|p| p.is_file())
    })
}

/// Runs chromium headless with `args`, killed after a minute.
fn run_browser(browser: &Path, args: &[String]) -> (bool, String, String) {
    let dir =
        std::env::temp_dir().join(format!("unisched-chromium-profile-{}", std::process::id()));
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", dir.display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    // Read both pipes while waiting: a full pipe would stall the browser.
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let stderr = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = (
        status.success(),
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn the_report_renders_in_headless_chromium() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: chromium is not installed (apt-get install -y chromium); the report was not opened in a browser"
        );
        return;
    };
    let traces = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/traces");
    let config = |name: &str| NamedConfig {
        name: name.to_string(),
        text: std::fs::read_to_string(traces.join(name)).unwrap(),
    };
    let options = SimulateOptions {
        configs: vec![config("bad-input.yaml"), config("queue-at-max.yaml")],
        input: TraceInput::Files {
            format: TraceFormat::Csv,
            traces: vec![traces.join("bad-input.csv")],
            machines: Vec::new(),
            import: ImportOptions {
                vcore_unit: 1000,
                memory_unit: 1 << 30,
                queue_template: None,
            },
        },
        nodes: Vec::new(),
        skip_bad_lines: false,
        tick_ms: 1000,
    };
    let trace = std::sync::Arc::new(simulate::load_trace(&options).unwrap());
    let runs = simulate::run(&options, &trace, |_, _| {}).unwrap();
    let html = simulate::html::render(&simulate::figures::figures(&trace, &runs));
    let dir = std::env::temp_dir().join(format!("unisched-report-browser-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("report.html");
    std::fs::write(&page, &html).unwrap();
    let url = format!("file://{}", page.display());
    let (ok, dom, stderr) = run_browser(&browser, &["--dump-dom".to_string(), url.clone()]);
    assert!(ok, "chromium failed: {stderr}");
    let charts = html.matches("<svg").count();
    assert!(charts >= 10, "only {charts} charts");
    assert_eq!(
        dom.matches("<svg").count(),
        charts,
        "the browser's DOM lost charts"
    );
    assert!(
        dom.contains("Refused, with reasons") && dom.contains("asks for gpu, which no node has")
    );
    let shot = dir.join("report.png");
    let (ok, _, stderr) = run_browser(
        &browser,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1400,3000".to_string(),
            url,
        ],
    );
    assert!(ok, "chromium failed: {stderr}");
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "screenshot of {} bytes",
        png.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
