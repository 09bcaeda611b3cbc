//! The base contract called from the host: one `handle` call per record, for a component in
//! the `handle` form that the host's adapter does not fit (`adapter/`, which calls `handle`
//! inside the component, and fits every component wit-component builds). Each call has its
//! own fresh deadline and fuel; a failed call is settled as a failed batch record is (the
//! subscription's `on-trap` for it), and the records after it go on in the next call, on a
//! fresh instance.
//!
//! The records of a batch are handed over by one run of `handle` calls under one call's setup,
//! as a `handle-batch` call's are: the call scope, the deadline machinery and the log budget
//! (of that many records) are made once per batch, not once per record. Between two records
//! the host moves the run on itself: what the record before wrote to stdout and stderr is
//! logged as its own, the next record gets a fresh deadline, fuel is refilled, and publishes
//! and log lines are the next record's. The host allocates nothing of its own per record
//! (`call_paths::handle_from_the_host_allocates_nothing_of_its_own_per_record`); wasmtime
//! allocates one, the fiber each call runs on.

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
        let fuel = self.fuel_per_record();
        let deliveries = &call.deliveries;
        let settled = &mut outcomes;
        let handling = async |live: &mut Live| {
            for (index, delivery) in deliveries.iter().enumerate() {
                live.store.data_mut().next_handle_record(index);
                if let Some(fuel) = fuel {
                    live.store.set_fuel(fuel)?;
                }
                let headers = wit_headers(delivery);
                let record = wit_record(delivery, &headers);
                let outcome = live
                    .exports
                    .handler
                    .call_handle(&mut live.store, call_info(call), record)
                    .await?;
                settled.push(outcome.into());
            }
            Ok(())
        };
        // Reports do not come from `handle` calls: each returns its outcome.
        let (result, _none) = self
            .call(CallKind::Handle, call, deliveries.clone(), handling)
            .await;
        match result {
            Ok(()) => Ok(outcomes),
            Err(failure) => Err(BatchFailure {
                settled: outcomes,
                failure,
            }),
        }
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
