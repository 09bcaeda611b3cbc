//! Runs the seed's settlement component end to end on the embedded in-process stream (no AWS
//! needed): feeds it sample ledger entries and prints each record's outcome and where the
//! shard's checkpoint stands.
//!
//! `cargo run -p ruststream-tests --example settlement`

use ruststream_runtime::{TestApp, log::Origin};
use ruststream_tests::guests;
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let path = guests::SETTLEMENT.path();
    let mut app = TestApp::start(&path).await?;
    println!(
        "loaded {} — app {} {}, subscriber `book` on stream `ledger`\n",
        path.display(),
        app.app().name,
        app.app().version
    );

    let entries = [(1, 120), (2, 0), (3, -40), (4, 75), (5, 310)];
    println!(
        "{:<6} {:>7}  {:<8} {:<58} held at",
        "entry", "amount", "outcome", "checkpoint"
    );
    for (id, amount) in entries {
        app.publish("ledger", &json!({ "id": id, "amount": amount }))
            .await?;
        let book = app.subscriber("book")?;
        let outcome = book
            .outcomes()
            .last()
            .map_or_else(|| "-".to_owned(), ToString::to_string);
        println!(
            "{id:<6} {amount:>7}  {outcome:<8} {:<58} {}",
            book.checkpoint().unwrap_or("(none)"),
            book.held_at().unwrap_or("-")
        );
    }

    println!("\nlog:");
    for line in app.logs() {
        let who = match line.origin {
            Origin::Guest => "guest",
            Origin::Runtime => "host",
        };
        println!("  {who:<5} {line}");
    }
    Ok(())
}
