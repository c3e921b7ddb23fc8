//! The seam between the driver and a master: subscribe, and send a call of
//! the current subscription. [`Client`] is the HTTP transport; an in-process
//! one lives in [`crate::in_process`], so the driver itself never sees master
//! code.
//!
//! A transport keeps the stream id of its latest subscription and sends it
//! with every call, and answers with the same typed errors as the HTTP
//! client whatever its medium.

use futures_util::future::BoxFuture;

use crate::client::{Answer, Client, ClientError, Subscription};
use crate::v1::scheduler::{Call, call};

/// How a driver reaches a master.
pub trait Transport: Send + Sync + 'static {
    /// SUBSCRIBE: resolves once SUBSCRIBED arrived (or the subscription failed).
    fn subscribe(
        &self,
        subscribe: call::Subscribe,
    ) -> BoxFuture<'static, Result<Subscription, ClientError>>;

    /// Any other call (its framework id set), with the latest stream id.
    fn call(&self, call: Call) -> BoxFuture<'static, Result<Answer, ClientError>>;
}

impl Transport for Client {
    fn subscribe(
        &self,
        subscribe: call::Subscribe,
    ) -> BoxFuture<'static, Result<Subscription, ClientError>> {
        let client = self.clone();
        Box::pin(async move { client.subscribe(subscribe).await })
    }

    fn call(&self, call: Call) -> BoxFuture<'static, Result<Answer, ClientError>> {
        let client = self.clone();
        Box::pin(async move { Client::call(&client, call).await })
    }
}
