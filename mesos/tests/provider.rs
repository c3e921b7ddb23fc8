//! The provider side against our master over real HTTP on an ephemeral
//! port, in both encodings: `unisched_mesos::provider`'s client and runner
//! with the directory-backed storage provider: subscriptions and the kept
//! id, resources in offers, a new resource version, typed refusals, and
//! external providers. Operations: `tests/provider_operations.rs`.

mod common;

use common::provider::*;
use common::*;
use unisched_mesos::http_client::{ClientError, ClientOptions};
use unisched_mesos::provider::storage::DirectoryPool;
use unisched_mesos::provider::{Endpoint, ProviderClient, runner};
use unisched_mesos::v1;
use unisched_mesos::v1::resource_provider::call;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribing_assigns_an_id_the_provider_keeps_and_resubscribes_with() {
    for ct in ENCODINGS {
        let Provided {
            m,
            root,
            handle,
            id: _,
        } = provided_master("subscribe", ct).await;
        let id = handle.status().provider_id.expect("an id");
        handle.stop().await.unwrap();
        let kept = std::fs::read_to_string(root.path().join("provider.json")).unwrap();
        assert!(kept.contains(&id), "{kept}");
        // A restart subscribes with the kept id and gets it again.
        let handle = start_provider(&m, root.path(), "disk:1000", ct).await;
        assert_eq!(handle.status().provider_id.as_deref(), Some(id.as_str()));
        let state = m.state().await;
        let providers = &state["slaves"][0]["resource_providers"];
        assert_eq!(providers.as_array().map(Vec::len), Some(1), "{state}");
        assert_eq!(
            providers[0]["resource_provider_info"]["id"]["value"],
            id.as_str()
        );
        assert_eq!(providers[0]["subscribed"], true);
        handle.stop().await.unwrap();
        // An unknown id gets no SUBSCRIBED.
        let client = ProviderClient::new(
            &m.url,
            Endpoint::Agent(1),
            ClientOptions {
                content_type: ct,
                ..ClientOptions::default()
            },
        )
        .unwrap();
        let unknown = v1::ResourceProviderInfo {
            id: Some(v1::ResourceProviderId {
                value: "not-a-provider".into(),
            }),
            r#type: TYPE.into(),
            name: "pool".into(),
            ..Default::default()
        };
        let refused = client.subscribe(unknown).await.unwrap_err();
        assert!(matches!(refused, ClientError::Dropped(_)), "{refused}");
        assert!(refused.to_string().contains("not-a-provider"), "{refused}");
        m.cluster.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_resources_are_offered_with_its_id_and_leave_with_it() {
    for ct in ENCODINGS {
        let Provided {
            m,
            root: _root,
            handle,
            id,
        } = provided_master("offered", ct).await;
        let mut f = m.subscribe(framework("fw", "*"), ct).await;
        let offer = offer_with(&m, &mut f, &id, is_raw).await;
        let raw = provided(&offer, &id);
        assert_eq!(raw.len(), 1, "{offer:?}");
        assert_eq!(amount(raw[0]), 1000.0);
        assert_eq!(
            offer.agent_id.value, m.cluster.agents[0],
            "a local provider's agent"
        );
        // The provider goes: its resources leave the offers.
        handle.stop().await.unwrap();
        let rescinded = rescinded(&mut f).await;
        assert_eq!(rescinded, offer.id);
        m.allocate().await;
        let again = f.offers().await;
        assert!(
            again.iter().all(|o| provided(o, &id).is_empty()),
            "{again:?}"
        );
        m.cluster.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_resource_version_rescinds_the_offers_holding_its_resources() {
    for ct in ENCODINGS {
        let Provided {
            m,
            root: _root,
            handle,
            id,
        } = provided_master("version", ct).await;
        let first = handle.status().resource_version;
        let mut f = m.subscribe(framework("fw", "*"), ct).await;
        let offer = offer_with(&m, &mut f, &id, is_raw).await;
        handle.resources_changed();
        let status = within(handle.wait_for(|s| s.state_updates >= 2)).await;
        assert_ne!(status.resource_version, first);
        let rescinded = rescinded(&mut f).await;
        assert_eq!(rescinded, offer.id);
        // They come back in a new offer.
        m.allocate().await;
        let back = offer_with(&m, &mut f, &id, is_raw).await;
        assert_ne!(back.id, offer.id);
        handle.stop().await.unwrap();
        m.cluster.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_provider_stands_on_a_node_of_its_own() {
    for ct in ENCODINGS {
        let m = Master::start(Setup::default()).await;
        let root = Root::new("external", ct);
        let pool = DirectoryPool::open(root.path(), "disk(*):500").unwrap();
        let handle =
            runner::spawn(pool, options(&m.url, Endpoint::Master, root.path(), ct)).unwrap();
        subscribed(&handle, 1).await;
        let id = handle.status().provider_id.unwrap();
        let mut f = m.subscribe(framework("fw", "*"), ct).await;
        let offer = offer_with(&m, &mut f, &id, is_raw).await;
        assert_ne!(offer.agent_id.value, m.cluster.agents[0]);
        assert_eq!(offer.hostname, format!("{TYPE}.pool"));
        assert_eq!(amount(provided(&offer, &id)[0]), 500.0);
        handle.stop().await.unwrap();
        m.cluster.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_masters_refusals_are_typed_errors() {
    for ct in ENCODINGS {
        let m = Master::start(Setup {
            token: Some("secret".into()),
            ..Setup::default()
        })
        .await;
        let options = |token: Option<&str>| ClientOptions {
            content_type: ct,
            token: token.map(str::to_string),
            ..ClientOptions::default()
        };
        let info = v1::ResourceProviderInfo {
            r#type: TYPE.into(),
            name: "pool".into(),
            ..Default::default()
        };
        // 401 without the token.
        let client = ProviderClient::new(&m.url, Endpoint::Agent(1), options(None)).unwrap();
        let e = client.subscribe(info.clone()).await.unwrap_err();
        assert_eq!(e.status(), Some(401), "{e}");
        // A call before a subscription never leaves.
        let e = client
            .update_state(call::UpdateState::default())
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::NotSubscribed), "{e}");
        // 404: no such process on the master.
        let nowhere = format!("{}/nowhere", m.url);
        let client =
            ProviderClient::new(&nowhere, Endpoint::Master, options(Some("secret"))).unwrap();
        let e = client.subscribe(info.clone()).await.unwrap_err();
        assert!(matches!(e, ClientError::NotFound(_)), "{e}");
        // 400: resources without the provider's id.
        let client =
            ProviderClient::new(&m.url, Endpoint::Agent(1), options(Some("secret"))).unwrap();
        let sub = client.subscribe(info).await.unwrap();
        assert_eq!(client.provider_id(), Some(sub.provider_id.clone()));
        assert_eq!(client.stream_id().as_deref(), Some(sub.stream_id.as_str()));
        let e = client
            .update_state(call::UpdateState {
                resources: resources("disk:10"),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(
            matches!(&e, ClientError::BadRequest(m) if m.contains("does not belong")),
            "{e}"
        );
        m.cluster.stop();
    }
}
