//! Publishing from handlers, delays that must survive a crash, and payloads as they arrive.

use std::time::Duration;

use ruststream::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, Serialize)]
pub struct Order {
    pub id: u64,
    pub customer: String,
}

/// Forwards every order to `shipments`, keyed by customer, and acks once it is there.
#[subscriber(KinesisStream::new("orders"))]
async fn forward(order: &Order, ctx: &mut Context<'_>) -> HandlerOutcome {
    let record = match Record::json(order) {
        Ok(record) => record
            .partition_key(&order.customer)
            .header("x-source", "orders"),
        Err(error) => {
            tracing::error!(%error, "cannot encode the order");
            return HandlerOutcome::drop();
        }
    };
    match publish("shipments", record) {
        Ok(published) => {
            tracing::info!(order = order.id, shard = %published.shard_id,
                sequence = %published.sequence_number, from = %ctx.sequence_number(), "forwarded");
            HandlerOutcome::ack()
        }
        Err(error) => {
            tracing::warn!(order = order.id, %error, "forwarding failed");
            HandlerOutcome::retry()
        }
    }
}

/// Publishes to a stream that does not exist, and reports the typed error.
#[subscriber(KinesisStream::new("orders.lost"))]
async fn misroute(order: &Order) -> HandlerOutcome {
    match publish("no-such-stream", Record::new(order.id.to_string())) {
        Ok(_) => HandlerOutcome::ack(),
        Err(error) => {
            tracing::warn!(order = order.id, error = %error, kind = ?error, "publish failed");
            HandlerOutcome::drop()
        }
    }
}

/// A reminder is sent 5 seconds after it arrives: the first delivery asks for that delay.
#[subscriber(KinesisStream::new("reminders"))]
async fn remind(order: &Order, ctx: &mut Context<'_>) -> HandlerOutcome {
    if ctx.attempt() == 1 {
        tracing::info!(order = order.id, "reminding in 5 s");
        HandlerOutcome::retry_after(Duration::from_secs(5))
    } else {
        tracing::info!(order = order.id, attempt = ctx.attempt(), "reminded");
        HandlerOutcome::ack()
    }
}

/// Logs each payload exactly as the handler receives it.
#[subscriber(KinesisStream::new("inbox"))]
async fn inspect(payload: &Raw, ctx: &mut Context<'_>) {
    let headers: Vec<String> = ctx
        .headers()
        .iter()
        .map(|(name, value)| format!("{name}={}", String::from_utf8_lossy(value)))
        .collect();
    tracing::info!(
        payload = %String::from_utf8_lossy(payload),
        headers = %headers.join(","),
        "received"
    );
}

#[service]
fn service(broker: KinesisBroker) -> RustStream {
    RustStream::new(AppInfo::new("relay", "0.1.0")).with_broker(broker, |b| {
        b.include(forward);
        b.include(misroute);
        b.include(remind);
        b.include(inspect);
    })
}
