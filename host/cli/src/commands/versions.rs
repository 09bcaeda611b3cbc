//! `ruststream versions`: the versions a running host keeps of a tenant's app.

use crate::args::AdminTarget;
use crate::status_view;

/// Prints the kept versions, or the host's JSON as is with `json`.
pub(crate) async fn versions(
    target: &AdminTarget,
    tenant: &str,
    app: &str,
    json: bool,
) -> anyhow::Result<()> {
    let list = super::client(target)?.versions(tenant, app).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        print!("{}", status_view::render_versions(&list, super::now_ms()));
    }
    Ok(())
}
