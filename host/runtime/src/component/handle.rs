//! The base contract: one `handle` call per record, for a component without the batch fast
//! path. Each call has its own fresh deadline and fuel; a failed call is settled as a failed
//! batch record is (the subscription's `on-trap` for it), and the records after it go on in
//! the next call, on a fresh instance.

use super::bindings::exports::ruststream::handler::handler as wit;
use super::instance::{BatchCall, BatchFailure, HandlerInstance, Live, call_info};
use super::state::CallKind;
use crate::outcome::Outcome;
use crate::record::Delivery;

impl HandlerInstance {
    /// Calls `handle` once per delivery of `call`, in order, until one fails.
    ///
    /// # Errors
    /// The outcomes of the records before the failed one, and how it failed.
    pub(super) async fn handle_each(
        &mut self,
        call: &BatchCall<'_>,
    ) -> Result<Vec<Outcome>, BatchFailure> {
        let mut outcomes = Vec::with_capacity(call.deliveries.len());
        for (index, delivery) in call.deliveries.iter().enumerate() {
            let info = call_info(call);
            let headers = wit_headers(delivery);
            let record = wit_record(delivery, &headers);
            let handling = async |live: &mut Live| {
                live.exports
                    .handler
                    .call_handle(&mut live.store, info, record)
                    .await
            };
            let one = call.deliveries.one(index);
            // Reports from a `handle` call are ignored: the call returns its outcome.
            let (result, _ignored) = self.call(CallKind::Handle, call, one, handling).await;
            match result {
                Ok(outcome) => outcomes.push(outcome.into()),
                Err(failure) => {
                    return Err(BatchFailure {
                        settled: outcomes,
                        failure,
                    });
                }
            }
        }
        Ok(outcomes)
    }
}

/// `delivery`'s user headers, borrowed, as the contract types them.
fn wit_headers(delivery: &Delivery) -> Vec<wit::Header<'_>> {
    delivery
        .headers
        .iter()
        .map(|header| wit::Header {
            name: &header.name,
            value: &header.value,
        })
        .collect()
}

/// `delivery` as the contract's `record`, borrowed.
fn wit_record<'a>(delivery: &'a Delivery, headers: &'a [wit::Header<'a>]) -> wit::Record<'a> {
    wit::Record {
        data: &delivery.payload,
        partition_key: &delivery.partition_key,
        sequence_number: &delivery.sequence_number,
        headers,
        arrival_ms: delivery.arrival_ms,
        attempt: delivery.attempt(),
    }
}
