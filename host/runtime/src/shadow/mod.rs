//! Shadow versions: a new version of an app run beside the live one on the same records, with
//! no effects, its handling of each record compared with the live version's.
//!
//! The live pipeline notes what it settled ([`ShardPipeline::note_settlements`]): each record,
//! its outcome (or trap) and the publishes the stream accepted while the call was on it. The
//! transport hands those to a [`ShadowRun`] of the shard, off the live path, which calls the
//! shadow version's own instance on the same records in the same order, under the tenant's
//! limits (its instance's memory counted in the tenant's [`MemoryBudget`], where it must fit
//! or skip), with a [`RecordingPublisher`]: every publish is answered as accepted and noted,
//! none is written. Nothing the shadow does settles anything: no checkpoint, no copy, no dead
//! letter, no quarantine; its traps are only counted. Each record is then [compared]
//! and the result tallied in a [`ShadowTally`], which keeps the first disagreements.
//!
//! [`ShardPipeline::note_settlements`]: crate::ShardPipeline::note_settlements
//! [`MemoryBudget`]: crate::tenant::MemoryBudget
//! [compared]: compare

mod compare;
mod run;
mod tally;

pub use crate::publish::{PublishLog, RecordedPublish, RecordingPublisher};
pub use compare::{Comparison, Handling, compare};
pub use run::{Settled, ShadowRun};
pub use tally::{
    Disagreement, SHADOW_RECORDS, SHADOW_SKIPPED, ShadowCounts, ShadowResult, ShadowTally,
    SkipReason,
};
