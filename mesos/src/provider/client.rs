//! The resource provider side of Mesos' v1 resource provider API as an async
//! client: SUBSCRIBE (its event stream), UPDATE_STATE,
//! UPDATE_OPERATION_STATUS and UPDATE_PUBLISH_RESOURCES_STATUS, JSON or
//! protobuf, on the master's endpoint (an external provider) or an agent's
//! (`/slave(N)/api/v1/resource_provider`, a local provider of agent N, as
//! `mesos-local` serves its agents' endpoints on the master's port).
//!
//! Like the scheduler client it keeps the `Mesos-Stream-Id` and the provider
//! id of the latest subscription, sends them with every later call, and
//! gives the master's answers as typed [`ClientError`]s. A SUBSCRIBE the
//! master answers but ends without SUBSCRIBED (upstream's manager drops a
//! resubscription with an id it does not know) is [`ClientError::Dropped`].
//! The API has no heartbeats (upstream sends providers none), so the event
//! stream has no watchdog.

use std::sync::Arc;

use futures_util::StreamExt;

use crate::codec::ContentType;
use crate::http_client::{
    ClientError, ClientOptions, EventStream, Http, Session, StreamError, body_of,
};
use crate::v1;
use crate::v1::resource_provider::{Call, Event, call, event};

/// The path of the resource provider API on the master.
pub const RESOURCE_PROVIDER_PATH: &str = "/api/v1/resource_provider";

/// Whose resource provider API a provider talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// The master's own: an external provider, whose resources stand on a
    /// node of their own.
    Master,
    /// Agent N's (`slave(N)` in `/state`'s `slaves[].pid`): a local
    /// provider, whose resources join that agent's.
    Agent(u32),
}

impl Endpoint {
    /// The endpoint's path on the master's port.
    pub fn path(self) -> String {
        match self {
            Endpoint::Master => RESOURCE_PROVIDER_PATH.to_string(),
            Endpoint::Agent(n) => format!("/slave({n}){RESOURCE_PROVIDER_PATH}"),
        }
    }
}

impl Endpoint {
    /// Where the agent `agent` serves the resource provider API: `N` or
    /// `slave(N)` is agent N on the master's port (as `mesos-local` serves
    /// its agents' endpoints); anything else is an agent id, looked up in
    /// the master's `/state`, whose `pid` (`slave(N)@host:port`) gives the
    /// agent's address and N. The address to call and the endpoint there.
    pub async fn of_agent(
        master: &str,
        agent: &str,
        options: &ClientOptions,
    ) -> Result<(String, Endpoint), ClientError> {
        let agent = agent.trim();
        if let Some(n) = slave_number(agent) {
            return Ok((master.to_string(), Endpoint::Agent(n)));
        }
        let url = crate::http_client::endpoint(master, "/state")?;
        let http = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout)
            .no_proxy()
            .build()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        let mut request = http.get(url.clone());
        if let Some(token) = &options.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| ClientError::Transport(format!("GET {url}: {e}")))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|e| ClientError::Transport(format!("GET {url}: {e}")))?;
        if status != 200 {
            return Err(ClientError::Unexpected { status, body });
        }
        let state: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| ClientError::Unexpected {
                status,
                body: format!("GET {url}: not JSON: {e}"),
            })?;
        let slaves = state["slaves"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let Some(slave) = slaves.iter().find(|s| s["id"] == agent) else {
            let known: Vec<&str> = slaves.iter().filter_map(|s| s["id"].as_str()).collect();
            return Err(ClientError::NotFound(format!(
                "the master knows no agent '{agent}' (agents: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        };
        let pid = slave["pid"].as_str().unwrap_or_default();
        let parsed = pid
            .split_once('@')
            .and_then(|(name, address)| Some((slave_number(name)?, address)))
            .filter(|(_, address)| !address.is_empty());
        match parsed {
            Some((n, address)) => Ok((format!("http://{address}"), Endpoint::Agent(n))),
            None => Err(ClientError::Unexpected {
                status,
                body: format!("agent '{agent}' has the pid '{pid}', not slave(N)@host:port"),
            }),
        }
    }
}

/// N of `N` or `slave(N)`.
fn slave_number(text: &str) -> Option<u32> {
    let inner = text
        .strip_prefix("slave(")
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or(text);
    inner.parse().ok()
}

/// An open subscription.
#[derive(Debug)]
pub struct ProviderSubscription {
    /// The id the master gave (the one subscribed with, on a resubscription).
    pub provider_id: v1::ResourceProviderId,
    /// This subscription's `Mesos-Stream-Id`.
    pub stream_id: String,
    /// The events after SUBSCRIBED.
    pub events: EventStream<Event>,
}

/// An async client of a master's resource provider API; cheap to clone
/// (clones share the connections and the session).
#[derive(Clone)]
pub struct ProviderClient {
    http: Arc<Http>,
    content_type: ContentType,
    session: Arc<Session<v1::ResourceProviderId>>,
}

impl std::fmt::Debug for ProviderClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderClient")
            .field("endpoint", &self.endpoint())
            .field("content_type", &self.content_type)
            .field("session", &self.session)
            .finish()
    }
}

impl ProviderClient {
    /// A client of `endpoint` on the master at `master` (`host:port` or an
    /// `http://` URL).
    pub fn new(
        master: &str,
        endpoint: Endpoint,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let content_type = options.content_type;
        let url = crate::http_client::endpoint(master, &endpoint.path())?;
        Ok(Self {
            http: Arc::new(Http::new(url, options)?),
            content_type,
            session: Arc::new(Session::default()),
        })
    }

    /// Where calls go.
    pub fn endpoint(&self) -> String {
        self.http.endpoint().to_string()
    }

    /// The encoding of calls and events.
    pub fn content_type(&self) -> ContentType {
        self.content_type
    }

    /// The provider id of the latest subscription.
    pub fn provider_id(&self) -> Option<v1::ResourceProviderId> {
        self.session.id()
    }

    /// The stream id of the latest subscription.
    pub fn stream_id(&self) -> Option<String> {
        self.session.stream_id()
    }

    /// SUBSCRIBE with `info` (with an id: a resubscription) and waits for
    /// SUBSCRIBED. Its stream id and provider id are kept for later calls.
    pub async fn subscribe(
        &self,
        info: v1::ResourceProviderInfo,
    ) -> Result<ProviderSubscription, ClientError> {
        let resubscribing = info.id.as_ref().map(|i| i.value.clone());
        let call = Call {
            r#type: Some(call::Type::Subscribe as i32),
            subscribe: Some(call::Subscribe {
                resource_provider_info: info,
            }),
            ..Default::default()
        };
        let timeout = self.http.options().subscribe_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let (stream_id, mut source) = self
            .http
            .subscribe::<Event>(
                body_of(&call, self.content_type),
                self.content_type,
                deadline,
            )
            .await?;
        let dropped = |how: &str| {
            ClientError::Dropped(match &resubscribing {
                Some(id) => format!(
                    "{how} without SUBSCRIBED: the master does not know resource provider {id} (or its type and name differ)"
                ),
                None => format!("{how} without SUBSCRIBED"),
            })
        };
        let first = match tokio::time::timeout_at(deadline, source.next()).await {
            Err(_) => return Err(dropped(&format!("no event for {timeout:?}"))),
            Ok(first) => first,
        };
        let provider_id = match first {
            None | Some(Err(StreamError::Closed)) => {
                return Err(dropped("the master closed the stream"));
            }
            Some(Err(e)) => return Err(ClientError::Stream(e)),
            Some(Ok(Event {
                subscribed: Some(event::Subscribed { provider_id }),
                ..
            })) => provider_id,
            Some(Ok(other)) => {
                return Err(ClientError::Unexpected {
                    status: 200,
                    body: format!(
                        "the first event of a subscription is {:?}, not SUBSCRIBED",
                        other.r#type()
                    ),
                });
            }
        };
        self.session.set(stream_id.clone(), provider_id.clone());
        Ok(ProviderSubscription {
            provider_id,
            stream_id: stream_id.to_str().unwrap_or_default().to_string(),
            events: EventStream::new(source, None),
        })
    }

    /// Sends any call but SUBSCRIBE with the stream id, filling in the
    /// provider id of the subscription when the call has none.
    pub async fn call(&self, mut call: Call) -> Result<(), ClientError> {
        let (stream_id, provider_id) = self.session.for_call();
        if call.resource_provider_id.is_none() {
            call.resource_provider_id = provider_id;
        }
        if call.resource_provider_id.is_none() || stream_id.is_none() {
            return Err(ClientError::NotSubscribed);
        }
        self.http
            .call(
                body_of(&call, self.content_type),
                self.content_type,
                stream_id.as_ref(),
            )
            .await
            .map(drop)
    }

    /// UPDATE_STATE: the provider's total resources, its pending and
    /// unacknowledged operations, and its resource version.
    pub async fn update_state(&self, update: call::UpdateState) -> Result<(), ClientError> {
        self.call(Call {
            r#type: Some(call::Type::UpdateState as i32),
            update_state: Some(update),
            ..Default::default()
        })
        .await
    }

    /// UPDATE_OPERATION_STATUS: a new status of an operation (retried by
    /// the provider until the master acknowledges it).
    pub async fn update_operation_status(
        &self,
        update: call::UpdateOperationStatus,
    ) -> Result<(), ClientError> {
        self.call(Call {
            r#type: Some(call::Type::UpdateOperationStatus as i32),
            update_operation_status: Some(update),
            ..Default::default()
        })
        .await
    }

    /// UPDATE_PUBLISH_RESOURCES_STATUS: the answer to PUBLISH_RESOURCES.
    pub async fn update_publish_resources_status(
        &self,
        update: call::UpdatePublishResourcesStatus,
    ) -> Result<(), ClientError> {
        self.call(Call {
            r#type: Some(call::Type::UpdatePublishResourcesStatus as i32),
            update_publish_resources_status: Some(update),
            ..Default::default()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_numbers_and_paths() {
        assert_eq!(slave_number("3"), Some(3));
        assert_eq!(slave_number("slave(12)"), Some(12));
        assert_eq!(slave_number("slave()"), None);
        assert_eq!(slave_number("5f1e-S0"), None);
        assert_eq!(Endpoint::Master.path(), "/api/v1/resource_provider");
        assert_eq!(
            Endpoint::Agent(2).path(),
            "/slave(2)/api/v1/resource_provider"
        );
    }
}
