//! `ruststream reload`: a running host re-reads its config and component files.

use crate::args::AdminTarget;
use crate::status_view;

/// Reloads and prints each version that went live, or that nothing changed.
pub(crate) async fn reload(target: &AdminTarget) -> anyhow::Result<()> {
    let deployed = super::client(target)?.reload().await?;
    if deployed.is_empty() {
        println!("nothing changed");
    }
    for one in &deployed {
        println!("{}", status_view::render_deployed(one));
    }
    Ok(())
}
