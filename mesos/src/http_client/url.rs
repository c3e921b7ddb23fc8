//! Where an API is: a master address as frameworks and providers write it
//! (`host:port`, `http://host:port`, `http://host:port/prefix`) made into the
//! URL of an API's endpoint (the scheduler's, a resource provider's), and a
//! 307's `Location` resolved against the current one.
//!
//! Mesos writes `Location` protocol-relative with the path
//! (`//leader:5050/api/v1/scheduler`), its docs show a bare `leader:5050`;
//! both, absolute URLs and absolute paths are taken.

use reqwest::Url;

use super::ClientError;

/// The endpoint `path` (`/api/v1/scheduler`, ...) of a master address. An
/// address that already ends in `path` is taken as it is.
pub fn endpoint(master: &str, path: &str) -> Result<Url, ClientError> {
    let address = master.trim();
    let invalid = |reason: &str| ClientError::InvalidMaster {
        address: master.to_string(),
        reason: reason.to_string(),
    };
    if address.is_empty() {
        return Err(invalid("empty"));
    }
    if address.starts_with("zk://") || address.starts_with("file://") {
        return Err(invalid(
            "master detection (zk://, file://) is not supported: give the master's host:port",
        ));
    }
    let text = if address.contains("://") {
        address.to_string()
    } else {
        format!("http://{address}")
    };
    let mut url = Url::parse(&text).map_err(|e| invalid(&e.to_string()))?;
    if url.scheme() != "http" {
        return Err(invalid("only http:// masters are supported"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    let prefix = url.path().trim_end_matches('/').to_string();
    if !prefix.ends_with(path) {
        url.set_path(&format!("{prefix}{path}"));
    }
    url.set_query(None);
    url.set_fragment(None);
    Ok(url)
}

/// The URL a redirect from `current` points to. A `Location` without a path
/// keeps the current path (the leader serves the API where this one does).
pub fn resolve_location(current: &Url, location: &str) -> Result<Url, ClientError> {
    let location = location.trim();
    let bad = |reason: String| ClientError::Redirect(format!("Location '{location}': {reason}"));
    if location.is_empty() {
        return Err(bad("empty".to_string()));
    }
    let scheme = current.scheme();
    let text = if let Some(rest) = location.strip_prefix("//") {
        format!("{scheme}://{rest}")
    } else if location.contains("://") {
        location.to_string()
    } else if location.starts_with('/') {
        return current.join(location).map_err(|e| bad(e.to_string()));
    } else {
        format!("{scheme}://{location}")
    };
    let mut url = Url::parse(&text).map_err(|e| bad(e.to_string()))?;
    if url.scheme() != "http" {
        return Err(bad("only http:// masters are supported".to_string()));
    }
    if url.path().is_empty() || url.path() == "/" {
        url.set_path(current.path());
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEDULER_PATH: &str = "/api/v1/scheduler";

    fn check_endpoint(master: &str, expect: &str) {
        let got = match endpoint(master, SCHEDULER_PATH) {
            Ok(url) => url.to_string(),
            Err(e) => format!("error: {e}"),
        };
        assert_eq!(got, expect, "{master}");
    }

    #[test]
    fn master_addresses() {
        check_endpoint("127.0.0.1:5050", "http://127.0.0.1:5050/api/v1/scheduler");
        check_endpoint(" localhost:5050 ", "http://localhost:5050/api/v1/scheduler");
        check_endpoint("http://m:5050/", "http://m:5050/api/v1/scheduler");
        check_endpoint(
            "http://m:5050/api/v1/scheduler",
            "http://m:5050/api/v1/scheduler",
        );
        check_endpoint("http://gw/mesos/?x=1", "http://gw/mesos/api/v1/scheduler");
        check_endpoint("", "error: invalid master address '': empty");
        check_endpoint(
            "zk://zk1:2181/mesos",
            "error: invalid master address 'zk://zk1:2181/mesos': master detection (zk://, file://) is not supported: give the master's host:port",
        );
        check_endpoint(
            "https://m:5050",
            "error: invalid master address 'https://m:5050': only http:// masters are supported",
        );
        let provider = |master| endpoint(master, "/slave(2)/api/v1/resource_provider").unwrap();
        assert_eq!(
            provider("m:5050").as_str(),
            "http://m:5050/slave(2)/api/v1/resource_provider"
        );
        assert_eq!(
            provider("http://gw/mesos").as_str(),
            "http://gw/mesos/slave(2)/api/v1/resource_provider"
        );
    }

    fn check_location(location: &str, expect: &str) {
        let current = Url::parse("http://standby:5050/api/v1/scheduler").unwrap();
        let got = match resolve_location(&current, location) {
            Ok(url) => url.to_string(),
            Err(e) => format!("error: {e}"),
        };
        assert_eq!(got, expect, "{location}");
    }

    #[test]
    fn redirect_locations() {
        let leader = "http://leader:5050/api/v1/scheduler";
        check_location("//leader:5050/api/v1/scheduler", leader);
        check_location("//leader:5050", leader);
        check_location("leader:5050", leader);
        check_location("http://leader:5050", leader);
        check_location("/elsewhere", "http://standby:5050/elsewhere");
        check_location("", "error: redirect: Location '': empty");
    }
}
