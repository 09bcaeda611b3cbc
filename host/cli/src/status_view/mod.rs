//! What the admin verbs print: the status tree of `ruststream status`, the lists of
//! `versions`, `audit`, `errors` and `token`, and the one-line answers of `seek`, `pause`,
//! `deploy`, `reload` and `rollback`.
//!
//! Every string from the host is shown with its control characters escaped: names, reasons
//! and app versions come from tenants' components, and must not rewrite the operator's
//! terminal.

mod answers;
mod audit;
mod errors;
mod fleet;
mod shadow;
mod shards;
mod status;
mod text;
mod tokens;
mod versions;

pub(crate) use answers::{
    render_deployed, render_moved, render_pause, render_shadow_deployed, render_shadow_dropped,
    render_undeployed,
};
pub(crate) use audit::render_audit;
pub(crate) use errors::render_errors;
pub(crate) use status::render_status;
pub(crate) use text::text;
pub(crate) use tokens::{render_token_made, render_tokens};
pub(crate) use versions::render_versions;
