//! The host's `handle` adapter: what reaches `handle` through it is what the batch fast path
//! hands the same component.

use ruststream_runtime::{TestApp, component::AdapterRoute};
use ruststream_tests::guests;
use serde_json::json;

#[tokio::test]
async fn every_field_of_a_record_reaches_handle_through_the_adapter_as_through_handle_batch()
-> anyhow::Result<()> {
    // The relay's `inspect` logs each payload and header as it receives them; through
    // `handle`, the adapter copies each into the component's own blocks, one call per record.
    let mut seen = Vec::new();
    for through_handle in [false, true] {
        let builder = TestApp::builder(guests::RELAY.path());
        let builder = match through_handle {
            true => builder.through_handle(),
            false => builder,
        };
        let mut app = builder.start().await?;
        let route = through_handle.then_some(AdapterRoute::Inline);
        assert_eq!(app.component_adapter_route(), route);
        let first = app
            .publish_with_headers(
                "inbox",
                &json!({"id": 1, "customer": "zoë"}),
                &[("x-trace", "a1"), ("x-empty", ""), ("x-lang", "ελληνικά")],
            )
            .await?;
        let second = app
            .publish("inbox", &json!({"id": 2, "customer": ""}))
            .await?;
        let received = app.logs_containing("received");
        let fields: Vec<_> = received
            .iter()
            .map(|line| {
                (
                    line.field("payload").map(str::to_owned),
                    line.field("headers").map(str::to_owned),
                    line.sequence_number.clone(),
                )
            })
            .collect();
        assert_eq!(fields.len(), 2, "{:?}", app.logs());
        assert_eq!(fields[0].0.as_deref(), Some(r#"{"customer":"zoë","id":1}"#));
        for header in ["x-trace=a1", "x-empty=", "x-lang=ελληνικά"] {
            let headers = fields[0].1.as_deref().unwrap_or_default();
            assert!(headers.split(',').any(|h| h == header), "{headers}");
        }
        assert_eq!(fields[1].1.as_deref(), Some(""));
        assert_eq!(fields[0].2.as_deref(), Some(first.sequence_number.as_str()));
        assert_eq!(
            fields[1].2.as_deref(),
            Some(second.sequence_number.as_str())
        );
        seen.push(fields);
    }
    assert_eq!(seen[0], seen[1]);
    Ok(())
}
