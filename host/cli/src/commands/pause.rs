//! `ruststream pause`: a tenant's handlers handed no records until `resume`.

use crate::args::AdminTarget;
use crate::status_view;

/// Pauses `tenant` and prints its state.
pub(crate) async fn pause(target: &AdminTarget, tenant: &str) -> anyhow::Result<()> {
    let state = super::client(target)?.pause(tenant).await?;
    println!("{}", status_view::render_pause(&state));
    Ok(())
}
