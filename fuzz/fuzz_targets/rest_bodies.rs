//! Fuzz target: request bodies the REST API parses, as its handlers parse them.
//!
//! The only REST route that reads a body is `POST /ws/v1/validate-conf`
//! (`server/src/rest.rs`, `validate_conf`): the raw body must be UTF-8, then goes
//! through `unisched_core::config::parse`, and the answer is JSON
//! `{"allowed": bool, "reason"?: errors}`. This target repeats those exact steps
//! (the handler is private and async; its parsing functions are public) and
//! checks the answer is valid JSON that says what the parse said. No other route
//! parses a request body (the gRPC bodies are covered by `si_requests`).

#![no_main]

use libfuzzer_sys::fuzz_target;

/// The handler's answer for a body: `Err` is the 400 text for non-UTF-8 input.
fn validate_conf(body: &[u8]) -> Result<serde_json::Value, String> {
    let text = std::str::from_utf8(body)
        .map_err(|e| format!("the configuration is not UTF-8 text: {e}"))?;
    Ok(match unisched_core::config::parse(text) {
        Ok(_) => serde_json::json!({ "allowed": true }),
        Err(errors) => serde_json::json!({ "allowed": false, "reason": errors.to_string() }),
    })
}

fuzz_target!(|data: &[u8]| {
    match validate_conf(data) {
        Ok(answer) => {
            let wire = serde_json::to_vec(&answer).expect("the answer serializes");
            let back: serde_json::Value =
                serde_json::from_slice(&wire).expect("the answer is valid JSON");
            assert_eq!(back, answer, "JSON round trip changed the answer");
            let allowed = back["allowed"].as_bool().expect("allowed is a bool");
            if !allowed {
                let reason = back["reason"].as_str().expect("reason is a string");
                assert!(!reason.is_empty(), "refused without a reason");
            }
        }
        Err(message) => {
            assert!(std::str::from_utf8(data).is_err());
            let body = serde_json::json!({ "status_code": 400, "message": message });
            let _ = serde_json::to_vec(&body).expect("the error serializes");
        }
    }
});
