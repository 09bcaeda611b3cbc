//! A tenant's instance memory on this host: what its live and shadow instances may hold, added
//! up, against the tenant's optional budget.
//!
//! Every instance reserves its whole memory cap ([`Limits::memory_bytes`]) while it exists,
//! whether or not it has grown to it yet: an instance can reach its cap at any call, so only
//! the cap bounds what a tenant's instances may hold together. Live instances are the
//! tenant's work and are never refused: past the budget they still run, and one warning says
//! so. A shadow is an experiment: its instance is created only if it fits beside everything
//! reserved, and it gives its room back as soon as the live instances need it.
//!
//! [`Limits::memory_bytes`]: super::Limits::memory_bytes

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{Gauge, Label};

use crate::metrics::{INSTANCE_MEMORY, label};
use ruststream_common::sync::lock;

/// Whose instance a reservation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceRole {
    /// The version that settles records.
    Live,
    /// A shadow version, compared with the live one and settling nothing.
    Shadow,
}

impl InstanceRole {
    /// The metric label (`role`).
    pub fn label(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Shadow => "shadow",
        }
    }
}

/// What a tenant's instances on this host have reserved, and its budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ReservedMemory {
    /// Bytes reserved by live instances.
    pub live_bytes: u64,
    /// Bytes reserved by shadow instances.
    pub shadow_bytes: u64,
    /// The tenant's budget, if it has one.
    pub budget_bytes: Option<u64>,
}

/// The memory a tenant's instances have reserved on this host, and the budget a shadow
/// instance must fit in. Shared by every app of the tenant (one per [`Tenant`](super::Tenant)).
///
/// The `ruststream_tenant_instance_memory_bytes{tenant, role}` gauges move by each
/// reservation's bytes (up when made, down when dropped), so two budgets of one tenant
/// (a reload replacing the tenant while its old apps drain) add up instead of overwriting
/// each other.
#[derive(Debug)]
pub struct MemoryBudget {
    tenant: String,
    budget: Option<u64>,
    reserved: Mutex<ReservedMemory>,
    warned: AtomicBool,
    gauges: [Gauge; 2],
}

impl MemoryBudget {
    /// The memory of `tenant`'s instances, within `budget` bytes for shadows (`None`: no
    /// budget, every reservation is made and only counted).
    pub fn new(tenant: &str, budget: Option<u64>) -> Self {
        let gauge = |role: InstanceRole| {
            let labels = vec![
                Label::new(label::TENANT, tenant.to_owned()),
                Label::new(label::ROLE, role.label()),
            ];
            metrics::gauge!(INSTANCE_MEMORY, labels)
        };
        Self {
            tenant: tenant.to_owned(),
            budget,
            reserved: Mutex::new(ReservedMemory {
                budget_bytes: budget,
                ..ReservedMemory::default()
            }),
            warned: AtomicBool::new(false),
            gauges: [gauge(InstanceRole::Live), gauge(InstanceRole::Shadow)],
        }
    }

    /// The budget, in bytes, if there is one.
    pub fn budget(&self) -> Option<u64> {
        self.budget
    }

    /// What is reserved now.
    pub fn reserved(&self) -> ReservedMemory {
        *lock(&self.reserved)
    }

    /// Reserves `bytes` for a live instance: never refused. The first time live instances
    /// alone reserve more than the budget, one warning says so (shadows then never fit).
    pub fn reserve_live(self: &Arc<Self>, bytes: usize) -> MemoryReservation {
        let bytes = bytes as u64;
        let live = {
            let mut reserved = lock(&self.reserved);
            reserved.live_bytes += bytes;
            reserved.live_bytes
        };
        if let Some(budget) = self.budget
            && live > budget
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                tenant = %self.tenant,
                live_mib = live >> 20,
                budget_mib = budget >> 20,
                "the tenant's live instances alone reserve more memory than its memory budget: \
                 they run anyway, and no shadow instance fits"
            );
        }
        self.reservation(InstanceRole::Live, bytes)
    }

    /// Reserves `bytes` for a shadow instance if everything reserved, and it, fit in the
    /// budget; `None` if they do not (then the shadow instance must not be created).
    pub fn try_reserve_shadow(self: &Arc<Self>, bytes: usize) -> Option<MemoryReservation> {
        let bytes = bytes as u64;
        {
            let mut reserved = lock(&self.reserved);
            if self
                .budget
                .is_some_and(|budget| reserved.live_bytes + reserved.shadow_bytes + bytes > budget)
            {
                return None;
            }
            reserved.shadow_bytes += bytes;
        }
        Some(self.reservation(InstanceRole::Shadow, bytes))
    }

    fn reservation(self: &Arc<Self>, role: InstanceRole, bytes: u64) -> MemoryReservation {
        self.gauges[role as usize].increment(bytes as f64);
        MemoryReservation {
            budget: self.clone(),
            role,
            bytes,
        }
    }
}

/// Memory reserved for one instance, given back when dropped.
#[derive(Debug)]
pub struct MemoryReservation {
    budget: Arc<MemoryBudget>,
    role: InstanceRole,
    bytes: u64,
}

impl MemoryReservation {
    /// The bytes reserved.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whose instance it is for.
    pub fn role(&self) -> InstanceRole {
        self.role
    }

    /// Gives the reservation in `slot` (a shadow's) back if its tenant is over its budget:
    /// live instances came after it and need the room. Returns whether it was given back.
    /// Shadows check at each batch, and the check and the giving back are one step, so no
    /// more shadows stop than it takes to be within the budget again.
    pub fn yield_if_over(slot: &mut Option<Self>) -> bool {
        let Some(held) = slot.as_mut() else {
            return false;
        };
        let Some(budget) = held.budget.budget else {
            return false;
        };
        {
            let mut reserved = lock(&held.budget.reserved);
            if reserved.live_bytes + reserved.shadow_bytes <= budget {
                return false;
            }
            reserved.shadow_bytes = reserved.shadow_bytes.saturating_sub(held.bytes);
        }
        held.budget.gauges[held.role as usize].decrement(held.bytes as f64);
        // Already given back: its drop has nothing left to return.
        held.bytes = 0;
        *slot = None;
        true
    }
}

impl Drop for MemoryReservation {
    fn drop(&mut self) {
        {
            let mut reserved = lock(&self.budget.reserved);
            let slot = match self.role {
                InstanceRole::Live => &mut reserved.live_bytes,
                InstanceRole::Shadow => &mut reserved.shadow_bytes,
            };
            *slot = slot.saturating_sub(self.bytes);
        }
        self.budget.gauges[self.role as usize].decrement(self.bytes as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn budget(mib: Option<u64>) -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget::new("acme", mib.map(|m| m << 20)))
    }

    #[test]
    fn live_is_never_refused_and_a_shadow_fits_only_beside_it() {
        let memory = budget(Some(48));
        let live: Vec<_> = (0..2).map(|_| memory.reserve_live(16 * MIB)).collect();
        let shadow = memory.try_reserve_shadow(16 * MIB);
        assert!(shadow.is_some(), "32 + 16 fit in 48");
        assert!(memory.try_reserve_shadow(16 * MIB).is_none(), "64 do not");
        let third = memory.reserve_live(16 * MIB);
        assert_eq!(
            memory.reserved(),
            ReservedMemory {
                live_bytes: 48 << 20,
                shadow_bytes: 16 << 20,
                budget_bytes: Some(48 << 20),
            }
        );
        drop((live, shadow, third));
        assert_eq!(
            memory.reserved().live_bytes + memory.reserved().shadow_bytes,
            0
        );
    }

    #[test]
    fn a_shadow_gives_its_room_back_to_live_instances_that_came_later() {
        let memory = budget(Some(48));
        let _live = memory.reserve_live(16 * MIB);
        let mut first = memory.try_reserve_shadow(16 * MIB);
        let mut second = memory.try_reserve_shadow(16 * MIB);
        assert!(
            !MemoryReservation::yield_if_over(&mut first),
            "within the budget"
        );
        let _more = memory.reserve_live(16 * MIB);
        assert!(
            MemoryReservation::yield_if_over(&mut first),
            "64 reserved of 48"
        );
        assert!(first.is_none());
        assert!(
            !MemoryReservation::yield_if_over(&mut second),
            "back within the budget: the other shadow stays"
        );
        assert!(second.is_some());
        assert!(memory.try_reserve_shadow(16 * MIB).is_none());
    }

    #[test]
    fn without_a_budget_every_reservation_is_made_and_counted() {
        let memory = budget(None);
        let _live = memory.reserve_live(64 * MIB);
        let mut shadows: Vec<_> = (0..4)
            .map(|_| memory.try_reserve_shadow(64 * MIB))
            .collect();
        assert!(shadows.iter().all(Option::is_some));
        assert!(!MemoryReservation::yield_if_over(&mut shadows[0]));
        assert_eq!(memory.reserved().shadow_bytes, 256 << 20);
        assert_eq!(memory.reserved().budget_bytes, None);
    }
}
