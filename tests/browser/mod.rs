//! A real headless browser for tests: Debian's chromium driven through
//! chromedriver's WebDriver API (JSON over HTTP, spoken here over a plain
//! TCP stream), with the browser's console log read back.
//!
//! `Browser::start` returns `None` with a loud message when chromium or
//! chromedriver is missing on a developer's machine; under CI (`CI` set) a
//! missing browser is a failure, since `.ci/run` installs it.

#![allow(dead_code)] // each test file uses its own subset

pub mod cluster;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";

fn chromedriver() -> Option<PathBuf> {
    ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A free loopback port (bound and released; chromedriver takes it next).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One HTTP/1.1 exchange with `Connection: close`; returns (status, body).
pub fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    let mut conn = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    conn.set_read_timeout(Some(Duration::from_secs(60))).ok();
    let payload = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        payload.len()
    );
    conn.write_all(head.as_bytes()).unwrap();
    conn.write_all(payload.as_bytes()).unwrap();
    // chromedriver may keep the connection open: read the head, then as
    // much body as it announces (or to the end when it announces none).
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = conn.read(&mut buf).expect("an answer in time");
        assert!(
            n > 0,
            "{method} {path}: connection closed before the answer"
        );
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let length = head.lines().find_map(|l| {
        l.strip_prefix("content-length:")
            .and_then(|v| v.trim().parse::<usize>().ok())
    });
    let mut body = raw[head_end..].to_vec();
    match length {
        Some(n) => {
            while body.len() < n {
                let got = conn.read(&mut buf).expect("the body in time");
                assert!(got > 0, "{method} {path}: body cut short");
                body.extend_from_slice(&buf[..got]);
            }
            body.truncate(n);
        }
        None => {
            conn.read_to_end(&mut body).ok();
        }
    }
    let body = String::from_utf8_lossy(&body).to_string();
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(&body)
    } else {
        body
    };
    (status, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A browser session; the driver and browser end when it is dropped.
pub struct Browser {
    driver: Child,
    addr: String,
    session: String,
    profile: PathBuf,
}

impl Browser {
    /// Starts chromedriver and a headless chromium session, or says loudly
    /// why not (see the module docs).
    pub fn start(test: &str) -> Option<Browser> {
        let driver = chromedriver();
        if !Path::new(CHROMIUM).exists() || driver.is_none() {
            let why = "chromium and chromedriver are not installed \
                       (apt-get install -y chromium chromium-driver)";
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: {why}; .ci/run installs them"
            );
            eprintln!("\n!!!!! {test} SKIPPED: {why} !!!!!\n");
            return None;
        }
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(driver.unwrap())
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let profile =
            std::env::temp_dir().join(format!("unisched-chromium-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        let mut browser = Browser {
            driver: child,
            addr,
            session: String::new(),
            profile,
        };
        browser.wait_ready();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage",
                    format!("--user-data-dir={}", browser.profile.display()),
                ],
            },
        }}});
        let (status, body) = http(&browser.addr, "POST", "/session", Some(&caps));
        assert_eq!(status, 200, "new session: {body}");
        let v: Value = serde_json::from_str(&body).expect("session JSON");
        browser.session = v["value"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        Some(browser)
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect(&self.addr).is_ok() {
                let (status, body) = http(&self.addr, "GET", "/status", None);
                if status == 200 && body.contains("\"ready\":true") {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "chromedriver never became ready");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn call(&self, method: &str, what: &str, body: Option<&Value>) -> Value {
        let path = format!("/session/{}{what}", self.session);
        let (status, text) = http(&self.addr, method, &path, body);
        assert_eq!(status, 200, "{method} {what}: {text}");
        serde_json::from_str::<Value>(&text).expect("WebDriver JSON")["value"].take()
    }

    /// Opens `url`.
    pub fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(&json!({"url": url})));
    }

    /// Runs `script` (a function body) in the page; returns its value.
    pub fn eval(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    /// Evaluates `script` until `done` holds for its value (or panics after
    /// `within`, showing the last value).
    pub fn wait_for(&self, within: Duration, script: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let v = self.eval(script);
            if done(&v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "the page never got there; last: {v}\nconsole: {:?}",
                self.console()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Saves a PNG of the window at `path`.
    pub fn screenshot(&self, path: &Path) {
        use base64::Engine as _;
        let v = self.call("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or(""))
            .expect("a base64 screenshot");
        std::fs::write(path, png).expect("screenshot written");
    }

    /// Sets the window size in CSS pixels.
    pub fn resize(&self, width: u32, height: u32) {
        self.call(
            "POST",
            "/window/rect",
            Some(&json!({"width": width, "height": height})),
        );
    }

    /// The console's errors (level SEVERE: uncaught exceptions, failed
    /// loads, `console.error`) since the last read of the console.
    pub fn console_errors(&self) -> Vec<String> {
        self.console()
            .into_iter()
            .filter(|(level, _)| level == "SEVERE")
            .map(|(_, message)| message)
            .collect()
    }

    /// The browser console entries since the last call: (level, message).
    pub fn console(&self) -> Vec<(String, String)> {
        let v = self.call("POST", "/se/log", Some(&json!({"type": "browser"})));
        v.as_array()
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| {
                        (
                            e["level"].as_str().unwrap_or("").to_string(),
                            e["message"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = http(
                &self.addr,
                "DELETE",
                &format!("/session/{}", self.session),
                None,
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
