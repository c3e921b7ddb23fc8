//! Mesos frameworks on the unisched core, both sides of the wire.
//!
//! The contract: the generated messages of the scheduler, resource provider
//! and operator APIs ([`v1`]), Mesos' JSON mapping and protobuf bodies
//! ([`codec`]), RecordIO framing ([`recordio`]) and resources as a domain
//! type ([`resources`]). The `.proto` files under `proto/` carry upstream's
//! message, field and enum names, numbers, labels and defaults; they never
//! change.
//!
//! The master side: the Mesos-compatible [`master`] on the core, embedded
//! [`agent`]s, a one-process cluster ([`local`]).
//!
//! The framework side: an async [`client`] of the v1 scheduler HTTP API and
//! the classic [`driver`] (`MesosSchedulerDriver` and its `Scheduler`
//! callbacks). The provider side: [`provider`], a client of the v1 resource
//! provider API, the `ResourceProvider` trait, the runner that does the
//! protocol for it, and a storage provider over a directory. Both sides share
//! [`http_client`], work against any Mesos master and never import the
//! master side; [`in_process`] is the one adapter that attaches a driver to
//! a master in the same process.
//!
//! Every generated message implements [`prost_reflect::ReflectMessage`], its
//! descriptor coming from [`DESCRIPTOR_POOL`]; the codecs use those
//! descriptors for field names, enum names, defaults and required fields.

use std::sync::LazyLock;

use prost_reflect::{DescriptorPool, MessageDescriptor};

pub mod agent;
pub mod client;
pub mod codec;
pub mod driver;
pub mod http_client;
pub mod in_process;
pub mod local;
pub mod master;
pub mod provider;
pub mod recordio;
pub mod resources;
mod task_state;

/// The Mesos version this master answers as (its API is Mesos 1.x's v1 API).
pub const MESOS_VERSION: &str = "1.11.0";

/// The descriptors of every message in `proto/`, built into the crate.
pub static DESCRIPTOR_POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    DescriptorPool::decode(
        include_bytes!(concat!(env!("OUT_DIR"), "/mesos_descriptors.bin")).as_ref(),
    )
    .expect("the descriptor set written by build.rs decodes")
});

/// The descriptor of a message of [`DESCRIPTOR_POOL`] by its full name; used
/// by the generated `ReflectMessage` impls, whose names come from the pool.
fn message_descriptor(full_name: &str) -> MessageDescriptor {
    DESCRIPTOR_POOL
        .get_message_by_name(full_name)
        .unwrap_or_else(|| panic!("{full_name} is in the descriptor pool"))
}

/// Package `mesos.v1`: the types shared by every Mesos v1 API (ids,
/// `FrameworkInfo`, `Offer`, `Resource`, `TaskInfo`, `TaskStatus`, ...).
///
/// proto2 through prost: `optional` fields are `Option<T>`, `required` ones
/// plain fields, enum fields `i32` with typed getters (`r#type()`,
/// `state()`), and explicit defaults are what the getters return when unset.
pub mod v1 {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]

    include!(concat!(env!("OUT_DIR"), "/mesos.v1.rs"));

    /// Package `mesos.v1.scheduler`: `Call`, `Event` and `Response` of the
    /// scheduler HTTP API.
    pub mod scheduler {
        include!(concat!(env!("OUT_DIR"), "/mesos.v1.scheduler.rs"));
    }

    /// Package `mesos.v1.executor`: `Call` and `Event` of the executor HTTP
    /// API, which the process agent serves to custom executors.
    pub mod executor {
        include!(concat!(env!("OUT_DIR"), "/mesos.v1.executor.rs"));
    }

    /// Package `mesos.v1.resource_provider`: `Call` and `Event` of the
    /// resource provider API.
    pub mod resource_provider {
        include!(concat!(env!("OUT_DIR"), "/mesos.v1.resource_provider.rs"));
    }

    /// Package `mesos.v1.master`: the master's operator API.
    pub mod master {
        include!(concat!(env!("OUT_DIR"), "/mesos.v1.master.rs"));
    }

    /// Package `mesos.v1.quota`, used by the operator API.
    pub mod quota {
        include!(concat!(env!("OUT_DIR"), "/mesos.v1.quota.rs"));
    }

    /// Package `mesos.v1.maintenance`, used by the operator API.
    pub mod maintenance {
        include!(concat!(env!("OUT_DIR"), "/mesos.v1.maintenance.rs"));
    }

    /// Package `mesos.v1.allocator`, used by the operator API.
    pub mod allocator {
        include!(concat!(env!("OUT_DIR"), "/mesos.v1.allocator.rs"));
    }
}

/// Package `mesos.internal`: the messages of Mesos' older (libprocess)
/// scheduler protocol that the master serves beside the v1 API
/// ([`master::libprocess`]).
pub mod internal {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]

    include!(concat!(env!("OUT_DIR"), "/mesos.internal.rs"));
}

include!(concat!(env!("OUT_DIR"), "/mesos_reflect.rs"));
