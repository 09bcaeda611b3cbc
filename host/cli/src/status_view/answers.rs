//! The one-line answers of `deploy` (with or without a shadow), `promote`, `reload`,
//! `rollback`, `undeploy`, `pause`, `resume` and `seek`.

use ruststream_fleet::admin::model::{
    Deployed, PauseState, ShadowDeployed, ShadowDropped, Undeployed,
};

use super::text::{short_hash, text};

/// `deploy --shadow`: the shadow now running.
pub(crate) fn render_shadow_deployed(shadow: &ShadowDeployed) -> String {
    format!(
        "{}/{} {} ({}, {}): running as a shadow on {}% of records (no effects); `ruststream \
         status` compares it, `ruststream promote {} {}` swaps it in",
        text(&shadow.tenant),
        text(&shadow.app),
        text(&shadow.version),
        text(&shadow.component),
        short_hash(&shadow.content_hash),
        shadow.sample_percent,
        text(&shadow.tenant),
        text(&shadow.app),
    )
}

/// `deploy --abort-shadow`.
pub(crate) fn render_shadow_dropped(dropped: &ShadowDropped) -> String {
    let what = if dropped.dropped {
        "shadow dropped"
    } else {
        "ran no shadow"
    };
    format!("{}/{}: {what}", text(&dropped.tenant), text(&dropped.app))
}

/// `deploy`, `rollback` and each line of `reload`: what now runs, and whether it replaced a
/// version.
pub(crate) fn render_deployed(deployed: &Deployed) -> String {
    let what = if deployed.swapped {
        "swapped in"
    } else {
        "started (new app)"
    };
    format!(
        "{}/{} {} ({}, {}): {what}",
        text(&deployed.tenant),
        text(&deployed.app),
        text(&deployed.version),
        text(&deployed.component),
        short_hash(&deployed.content_hash)
    )
}

/// `undeploy`: what stopped for good.
pub(crate) fn render_undeployed(gone: &Undeployed) -> String {
    format!(
        "{}/{} (app {}): stopped; a restart does not run it again",
        text(&gone.tenant),
        text(&gone.component),
        text(&gone.app)
    )
}

/// `pause` and `resume`: the tenant's state afterwards.
pub(crate) fn render_pause(state: &PauseState) -> String {
    let word = if state.paused { "paused" } else { "running" };
    format!("tenant {}: {word}", text(&state.tenant))
}

/// `seek`: the shards that moved.
pub(crate) fn render_moved(moved: &[String]) -> String {
    if moved.is_empty() {
        return "no shard moved".to_owned();
    }
    let shards: Vec<_> = moved.iter().map(|shard| text(shard)).collect();
    format!("moved {} shard(s): {}", moved.len(), shards.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_answers() {
        let deployed = Deployed {
            tenant: "acme".to_owned(),
            app: "ledger".to_owned(),
            component: "ledger.wasm".to_owned(),
            version: "0.3.0".to_owned(),
            content_hash: "0123456789abcdef".to_owned(),
            swapped: false,
        };
        let shown = render_deployed(&deployed);
        assert_eq!(
            shown,
            "acme/ledger 0.3.0 (ledger.wasm, #0123456789ab): started (new app)"
        );
        let paused = PauseState {
            tenant: "acme".to_owned(),
            paused: true,
        };
        assert_eq!(render_pause(&paused), "tenant acme: paused");
        assert_eq!(render_moved(&[]), "no shard moved");
        let moved = ["a".to_owned(), "b".to_owned()];
        assert_eq!(render_moved(&moved), "moved 2 shard(s): a, b");
    }
}
