//! Commands from API threads to the scheduling thread, and the stateless
//! preparation API threads do before sending them (resource conversion), so the
//! scheduling thread only applies.

use std::sync::Arc;

use crossbeam_channel::Sender;
use unisched_shim_api::{ResourceManagerCallback, SchedulerResult};
use unisched_si as si;

use super::objects::AskExtra;
use crate::resources::{Resource, ResourceNames};
use crate::snapshot::PartitionSnapshot;

/// A wire resource converted on the API thread; `None` when the field was absent.
pub type Converted = Option<Result<Resource, String>>;

/// An ask as the scheduling thread takes it in: resource converted, key
/// shared, tags and task group already in their out-of-line record, the wire
/// strings it no longer needs freed on the API thread. Less than half the
/// size of the wire ask, so a batch of them is cheap to hand over and read.
#[derive(Debug)]
pub struct PreparedAsk {
    /// Allocation key.
    pub key: Arc<str>,
    /// Application id.
    pub application_id: String,
    /// Partition name (unqualified).
    pub partition_name: String,
    /// Its resource.
    pub resource: Result<Resource, String>,
    /// Priority.
    pub priority: i32,
    /// Allocations wanted (as sent; checked by the scheduling thread).
    pub max_allocations: i32,
    /// Gang placeholder.
    pub placeholder: bool,
    /// Originator.
    pub originator: bool,
    /// Preemption policy as sent.
    pub preemption_policy: Option<si::PreemptionPolicy>,
    /// Tags and task group; `None` when both are empty.
    pub extra: Option<Box<AskExtra>>,
}

impl PreparedAsk {
    /// Converts one wire ask.
    pub fn new(names: &ResourceNames, ask: si::AllocationAsk) -> Self {
        let resource = names
            .from_si(ask.resource_ask.as_ref())
            .map_err(|e| e.to_string());
        Self {
            key: Arc::from(ask.allocation_key),
            application_id: ask.application_id,
            partition_name: ask.partition_name,
            resource,
            priority: ask.priority,
            max_allocations: ask.max_allocations,
            placeholder: ask.placeholder,
            originator: ask.originator,
            preemption_policy: ask.preemption_policy,
            extra: AskExtra::boxed(ask.tags.into_iter().collect(), ask.task_group_name),
        }
    }
}

/// A node request entry with its resources converted.
#[derive(Debug)]
pub struct PreparedNode {
    /// The node info (resources and existing allocations taken out).
    pub info: si::NodeInfo,
    /// Schedulable resource.
    pub capacity: Converted,
    /// Occupied resource.
    pub occupied: Converted,
    /// Existing allocations, each with its resource.
    pub existing: Vec<(si::Allocation, Result<Resource, String>)>,
}

/// An allocation request with its resources converted.
#[derive(Debug)]
pub struct PreparedAllocationRequest {
    /// The RM.
    pub rm_id: String,
    /// Asks.
    pub asks: Vec<PreparedAsk>,
    /// Releases (allocations and asks).
    pub releases: si::AllocationReleasesRequest,
    /// Recovered allocations.
    pub allocations: Vec<(si::Allocation, Result<Resource, String>)>,
}

/// Converts an allocation's resource, leaving the map behind.
pub fn prepare_allocation(
    names: &ResourceNames,
    mut alloc: si::Allocation,
) -> (si::Allocation, Result<Resource, String>) {
    let res = names
        .from_si(alloc.resource_per_alloc.as_ref())
        .map_err(|e| e.to_string());
    alloc.resource_per_alloc = None;
    (alloc, res)
}

/// Converts what the scheduling thread would otherwise convert.
pub fn prepare_allocation_request(
    names: &ResourceNames,
    request: si::AllocationRequest,
) -> PreparedAllocationRequest {
    let asks = request
        .asks
        .into_iter()
        .map(|ask| PreparedAsk::new(names, ask))
        .collect();
    PreparedAllocationRequest {
        rm_id: request.rm_id,
        asks,
        releases: request.releases.unwrap_or_default(),
        allocations: request
            .allocations
            .into_iter()
            .map(|a| prepare_allocation(names, a))
            .collect(),
    }
}

/// Converts the resources of a node request.
pub fn prepare_nodes(names: &ResourceNames, request: si::NodeRequest) -> Vec<PreparedNode> {
    request
        .nodes
        .into_iter()
        .map(|mut info| {
            let convert = |r: Option<si::Resource>| {
                r.map(|r| names.from_si(Some(&r)).map_err(|e| e.to_string()))
            };
            let capacity = convert(info.schedulable_resource.take());
            let occupied = convert(info.occupied_resource.take());
            let existing = std::mem::take(&mut info.existing_allocations)
                .into_iter()
                .map(|a| prepare_allocation(names, a))
                .collect();
            PreparedNode {
                info,
                capacity,
                occupied,
                existing,
            }
        })
        .collect()
}

/// Work for the scheduling thread.
pub enum Command {
    /// Register (or re-register) an RM.
    Register {
        /// The request.
        request: si::RegisterResourceManagerRequest,
        /// The RM's callback.
        callback: Arc<dyn ResourceManagerCallback>,
        /// Where the outcome goes.
        reply: Sender<SchedulerResult<()>>,
    },
    /// Asks, releases, recovered allocations.
    Allocation(PreparedAllocationRequest),
    /// Applications added and removed.
    Application(si::ApplicationRequest),
    /// Offer demand, filters and policy of an offer-based RM.
    Offers(super::offers::PreparedOffers),
    /// Node actions.
    Node {
        /// The RM.
        rm_id: String,
        /// The nodes.
        nodes: Vec<PreparedNode>,
    },
    /// Apply a new configuration text for an RM.
    UpdateConfiguration {
        /// The RM (cluster id).
        rm_id: String,
        /// The text, or why it could not be read.
        text: Result<String, String>,
        /// Where the outcome goes.
        reply: Sender<SchedulerResult<()>>,
    },
    /// Apply a configuration changed through the core (e.g. REST), then ask the
    /// RM to persist it through its dispatcher.
    SetConfiguration {
        /// The RM (cluster id).
        rm_id: String,
        /// The new text.
        text: String,
        /// Where the outcome of applying goes.
        reply: Sender<SchedulerResult<()>>,
        /// Where the RM's answer to the persistence call goes (dropped when
        /// applying failed).
        persisted: Sender<Result<si::UpdateConfigurationResponse, String>>,
    },
    /// Reply (by dropping the sender) once everything before is applied,
    /// scheduling is quiescent and callbacks are delivered.
    Settle(Sender<()>),
    /// A snapshot of a partition, once scheduling is quiescent.
    Snapshot {
        /// Partition name, qualified or plain.
        partition: String,
        /// Where it goes.
        reply: Sender<Option<PartitionSnapshot>>,
    },
    /// Qualified names of all partitions.
    Partitions(Sender<Vec<String>>),
    /// Look at the clock again.
    Tick,
    /// Stop the loop.
    Shutdown,
}
