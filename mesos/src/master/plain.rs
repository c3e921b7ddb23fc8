//! An agent's free resources in brief, when they are all plain scalars.
//!
//! Most agents offer nothing but unreserved cpus, mem, disk and gpus. An
//! allocation run leases each agent's whole remainder, and turning the lease
//! into an offer used to read every free `v1::Resource` entry (192 bytes
//! each, their names on the heap) three times: to decide what the grant
//! takes, to set the offer's role, and to encode it. A run reads ten
//! thousand agents once each, so each of those reads waited for memory.
//!
//! [`PlainFree`] is a few words kept in the agent beside `free`, made again
//! whenever `free` changes: each entry's name (one of the well-known ones,
//! `&'static`), its amount in fixed point and its value as the entry holds
//! it. When the lease is for the agent's default pool and grants at least
//! every amount, the whole list moves into the offer without being read
//! (`Agent::take_all_plain`), and the offer is encoded from the brief. Any
//! other case (a provider's or a reserved pool, a range or a set, a name
//! not known here, a grant of less) goes the long way, as before; a debug
//! check makes sure both ways give the same offer.

use smallvec::SmallVec;

use crate::resources::Resources;
use crate::resources::value::Scalar;
use crate::v1;

/// One plain scalar of an agent's free resources.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlainScalar {
    /// Its name (one of [`KNOWN`]).
    pub name: &'static str,
    /// How much, in fixed point (what a grant is compared with).
    pub amount: Scalar,
    /// How much, as the entry holds it (what an offer shows).
    pub value: f64,
}

/// The agent's free resources, entry by entry, in their order.
pub type PlainFree = SmallVec<[PlainScalar; 4]>;

/// The scalar names a brief can hold: those of nearly every agent.
pub const KNOWN: [&str; 4] = ["cpus", "mem", "disk", "gpus"];

/// Where `name` is in [`KNOWN`].
pub fn known_index(name: &str) -> Option<usize> {
    KNOWN.iter().position(|k| *k == name)
}

/// The brief of `free`, or `None` when an entry is anything but a plain
/// scalar of a known name (or a name repeats, which a normalised collection
/// never has).
pub fn brief(free: &Resources) -> Option<PlainFree> {
    let mut out = PlainFree::new();
    for r in free.iter() {
        let name = KNOWN.iter().copied().find(|k| *k == r.name)?;
        if !is_plain(r) || out.iter().any(|p| p.name == name) {
            return None;
        }
        let value = r.scalar.as_ref()?.value;
        out.push(PlainScalar {
            name,
            amount: Scalar::from_f64(value),
            value,
        });
    }
    Some(out)
}

/// A scalar of no provider, reservation, disk, revocable or shared kind
/// (nothing but a name, a value and perhaps an allocation): one of an
/// agent's default pool that any role may be offered, and one an offer
/// encodes in a few bytes (`offer_wire.rs`).
pub fn is_plain_scalar(r: &v1::Resource) -> bool {
    #[allow(deprecated)] // The legacy fields must be absent too.
    let legacy = r.role.is_none() && r.reservation.is_none();
    legacy
        && r.provider_id.is_none()
        && r.r#type == v1::value::Type::Scalar as i32
        && r.ranges.is_none()
        && r.set.is_none()
        && r.reservations.is_empty()
        && r.disk.is_none()
        && r.revocable.is_none()
        && r.shared.is_none()
}

/// A plain scalar of free resources (not allocated).
fn is_plain(r: &v1::Resource) -> bool {
    is_plain_scalar(r) && r.allocation_info.is_none()
}

/// True when a grant takes every entry whole: each name granted at least
/// its amount (`Resources::take_offer_exact` then moves the whole list).
pub fn granted_whole(brief: &PlainFree, granted: impl Fn(&str) -> Option<Scalar>) -> bool {
    !brief.is_empty()
        && brief
            .iter()
            .all(|p| granted(p.name).is_some_and(|g| g >= p.amount))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brief_is_made_only_of_plain_scalars_of_known_names() {
        let plain = Resources::parse("cpus:8;mem:4096.5").expect("parses");
        let b = brief(&plain).expect("plain");
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].name, "cpus");
        assert_eq!(b[0].amount, Scalar::from_f64(8.0));
        assert_eq!(b[1].value, 4096.5);
        assert_eq!(brief(&Resources::default()), Some(PlainFree::new()));
        for text in [
            "cpus:8;ports:[31000-32000]",
            "cpus(web):8",
            "cpus:8;fpgas:2",
            "cpus:8;zones:{a,b}",
        ] {
            let r = Resources::parse(text).expect("parses");
            assert_eq!(brief(&r), None, "{text}");
        }
        let mut allocated = plain.clone();
        allocated.allocate("web");
        assert_eq!(brief(&allocated), None);
    }

    #[test]
    fn a_grant_takes_the_whole_only_when_it_covers_every_entry() {
        let b = brief(&Resources::parse("cpus:8;mem:4096").expect("parses")).expect("plain");
        let grant = |cpus: f64, mem: Option<f64>| {
            move |name: &str| match name {
                "cpus" => Some(Scalar::from_f64(cpus)),
                "mem" => mem.map(Scalar::from_f64),
                _ => None,
            }
        };
        assert!(granted_whole(&b, grant(8.0, Some(4096.0))));
        assert!(granted_whole(&b, grant(9.0, Some(5000.0))));
        assert!(!granted_whole(&b, grant(7.999, Some(4096.0))));
        assert!(!granted_whole(&b, grant(8.0, None)));
        assert!(!granted_whole(&PlainFree::new(), grant(8.0, Some(1.0))));
    }
}
